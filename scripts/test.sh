#!/bin/sh
# Installs what is needed, builds memtrack and runs every test.
# The options are given explicitly: build/ may hold the demo's cache (tests off).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTRACK_TESTS=ON -DMEMTRACK_BENCHMARKS=ON
cmake --build build -j"$(nproc)"
# A run that finds no test fails: it would otherwise pass without testing anything.
# Tests run in parallel; the recorder tests one at a time (a RESOURCE_LOCK,
# tests/CMakeLists.txt).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ctest --test-dir build --output-on-failure --no-tests=error -j"$(nproc)" --timeout 300 -O "$log" || status=$?
# A skipped test passes ctest: say how many and why (each prints its reason,
# "SKIPPED: ...", shown here by running it again alone). With
# MEMTRACK_NO_SKIPS=1 (CI, where everything the tests need is installed) a
# skip fails the run.
skipped=$(grep -c '\*\*\*Skipped' "$log" || true)
echo "test.sh: $skipped test(s) skipped"
grep '\*\*\*Skipped' "$log" | head -n 30 | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*/\1/' |
  while read -r name; do
    why=$(ctest --test-dir build -R "^${name}\$" -V --timeout 60 2>&1 | grep -m 1 -o 'SKIPPED[^*]*' || true)
    echo "  $name: ${why:-no reason printed}"
  done
if [ "$skipped" -gt 0 ] && [ "${MEMTRACK_NO_SKIPS:-0}" = 1 ]; then
  echo "test.sh: skips fail this run (MEMTRACK_NO_SKIPS=1: every dependency should be here)" >&2
  status=1
fi
exit $status
