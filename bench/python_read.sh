#!/bin/sh
# Instructions of one read of CPython's frames by the interposer
# (python_frames.c), by the depth of the Python stack: callgrind counts
# mt_python_read's instructions (inclusive) in python3 calling it through
# ctypes from loops DEPTH frames deep (bench/python_read.py). Instructions,
# not time: the figure does not depend on the machine's load.
# Usage: bench/python_read.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-20000}
library=$build/bench/libpython_read.so
echo "depth  frames read  instructions a read  a frame"
for depth in 1 10 30 60; do
  out=$tmp/callgrind.$depth
  frames=$(valgrind --tool=callgrind --callgrind-out-file="$out" /usr/bin/python3 "$here/python_read.py" \
             "$library" "$depth" "$rounds" 2>/dev/null)
  callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
    awk -v depth="$depth" -v frames="$frames" -v reads=$((2 * rounds + 1)) '
      /mt_python_read \[/ { gsub(",", "", $1); n = $1 / reads
                            printf "%5d  %11d  %19.0f  %7.1f\n", depth, frames, n, n / frames; exit }'
done
