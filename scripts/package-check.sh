#!/bin/sh
# Makes memtrack's Debian package from a build, installs it with apt-get (so
# its declared dependencies are resolved as on a user's machine), records the
# demo with the installed /usr/bin/memtrack on the fast path, reads the report,
# and removes the package again. Root only (it installs a package).
# Usage: scripts/package-check.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
BUILD=$(readlink -f "${1:-build}")
work=$(mktemp -d /tmp/memtrack-package.XXXXXX)
installed=
cleanup() {
  [ -z "$installed" ] || dpkg -P memtrack >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
if dpkg-query -W -f='${Status}' memtrack 2>/dev/null | grep -q 'install ok installed'; then
  echo "package-check: a memtrack package is installed already; not touching it" >&2
  exit 2
fi
(cd "$work" && cpack --config "$BUILD/CPackConfig.cmake" -G DEB >/dev/null)
deb=$(ls "$work"/memtrack_*.deb)
echo "package-check: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -c "$deb" | awk '{print $6}' | grep -E '^\./usr/(bin/memtrack|lib/memtrack/libmemtrack-interpose\.so)$' |
  sort > "$work/files"
[ "$(wc -l < "$work/files")" = 2 ] || { echo "package-check: memtrack or its interposer is missing:" >&2;
                                         dpkg-deb -c "$deb" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null
installed=1
/usr/bin/memtrack record -o "$work/demo.zst" -- "$BUILD/demo/memtrack_demo" > "$work/record.out" 2>&1 ||
  { cat "$work/record.out" >&2; exit 1; }
if grep -q 'no fast path' "$work/record.out"; then
  echo "package-check: the installed memtrack did not find its interposer:" >&2
  cat "$work/record.out" >&2
  exit 1
fi
/usr/bin/memtrack report "$work/demo.zst" > "$work/report.txt"
grep -q 'recorded by.*the fast path' "$work/report.txt" ||
  { echo "package-check: the report does not say the fast path recorded the demo:" >&2; cat "$work/report.txt" >&2; exit 1; }
echo "package-check: installed, recorded the demo on the fast path, removed"
