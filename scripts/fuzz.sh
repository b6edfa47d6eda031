#!/bin/sh
# Builds the libFuzzer harnesses of fuzz/ (clang 14, ASan+UBSan, into
# build-fuzz/) and runs each for FUZZ_SECONDS seconds (default 30), as many
# at once as there are cores, from its committed seed corpus
# fuzz/corpus/<harness>/. New inputs go to a
# scratch corpus, not into the repository. A crash, sanitizer report, leak or
# slow input fails the script; the input is kept in build-fuzz/fuzz-findings/.
#   FUZZ_SECONDS=600 scripts/fuzz.sh            # longer runs
#   FUZZERS="artifact_fuzzer" scripts/fuzz.sh    # some harnesses only
#   scripts/fuzz.sh build|run                    # one step only (.ci/run)
set -eu
cd "$(dirname "$0")/.."
step=${1:-all}
seconds=${FUZZ_SECONDS:-30}
fuzzers=${FUZZERS:-"artifact_fuzzer msgpack_fuzzer elf_symbolizer_fuzzer cfi_rules_fuzzer module_artifacts_fuzzer suppressions_fuzzer python_lines_fuzzer"}
build=build-fuzz
if [ "$step" != run ]; then
  scripts/install-deps.sh
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMEMTRACK_FUZZ=ON -DMEMTRACK_TESTS=OFF -DMEMTRACK_BENCHMARKS=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target memtrack_fuzzers
fi
[ "$step" != build ] || exit 0
findings="$build/fuzz-findings"
mkdir -p "$findings"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One fuzzer per core at a time: each still runs for $seconds on a core of its own.
run_fuzzer() {
  mkdir -p "$scratch/$1"
  if "$build/fuzz/$1" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$findings/$1-" "$scratch/$1" "fuzz/corpus/$1" >"$findings/$1.log" 2>&1; then
    echo ok >"$scratch/$1.outcome"
  else
    echo FAILED >"$scratch/$1.outcome"
  fi
}
at_once=$(nproc)
running=0
for fuzzer in $fuzzers; do
  run_fuzzer "$fuzzer" &
  running=$((running + 1))
  if [ "$running" -ge "$at_once" ]; then
    wait
    running=0
  fi
done
wait
failed=""
for fuzzer in $fuzzers; do
  outcome=$(cat "$scratch/$fuzzer.outcome")
  [ "$outcome" = ok ] || failed="$failed $fuzzer"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$findings/$fuzzer.log")
  echo "$fuzzer: $outcome, ${runs:-?} executions in ${seconds} s, corpus $(ls "$scratch/$fuzzer" | wc -l) new inputs"
done
if [ -n "$failed" ]; then
  echo "fuzzing found problems in:$failed (logs and inputs in $findings/)" >&2
  exit 1
fi
