#!/bin/sh
# What reading Python frames costs (issue 31): python3 (PYTHONMALLOC=malloc)
# on bench/work.py (shallow, 0.5 M allocator calls) and bench/work_deep.py
# (allocations ~35 Python frames deep), untraced, recorded with call paths
# (the default: Python frames read) and with MEMTRACK_PYTHON_FRAMES=0 (native
# frames only), and by memray when it is installed, interleaved. Medians of
# ROUNDS runs: wall and CPU s of everything the run started.
# Usage: bench/python_frames.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-5}
memray=$(command -v memray || true)
modes="untraced python-frames native-only"
[ -n "$memray" ] && modes="$modes memray-native"
for _ in $(seq "$rounds"); do
  for script in work work_deep; do
    run() {
      mode=$1; shift
      timed "$script $mode" "$tmp/$script.$mode" env PYTHONMALLOC=malloc "$@" /usr/bin/python3 "$here/$script.py"
    }
    run untraced
    run python-frames "$memtrack" record -q -o "$tmp/a.zst" --
    run native-only env MEMTRACK_PYTHON_FRAMES=0 "$memtrack" record -q -o "$tmp/b.zst" --
    if [ -n "$memray" ]; then run memray-native "$memray" run --native -q -f -o "$tmp/m.bin"; fi
  done
done
echo "median wall s / CPU s (slowdown vs untraced), $rounds interleaved runs"
for script in work work_deep; do
  program_summary "$script" $modes
  c1=$(awk '{print $2}' "$tmp/$script.python-frames" | median)
  c0=$(awk '{print $2}' "$tmp/$script.native-only" | median)
  awk -v s="$script" -v a="$c1" -v b="$c0" 'BEGIN { printf "  %s: Python frames cost %+.1f%% CPU over native frames only\n", s, (a / b - 1) * 100 }'
done
