#!/bin/sh
# Instructions of one read of CPython's frames by the interposer
# (python_frames.c), and of mixing them into the path's hash, by the depth of
# the Python stack: callgrind counts mt_python_read's and mt_python_mix's
# instructions (inclusive) in python3 calling them through ctypes from loops
# DEPTH frames deep (bench/python_read.py). Instructions,
# not time: the figure does not depend on the machine's load.
# Usage: bench/python_read.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-20000}
library=$build/bench/libpython_read.so
echo "depth  frames read  read: instructions (a frame)  mix: instructions"
for depth in 1 10 30 60; do
  out=$tmp/callgrind.$depth
  frames=$(valgrind --tool=callgrind --callgrind-out-file="$out" /usr/bin/python3 "$here/python_read.py" \
             "$library" "$depth" "$rounds" 2>/dev/null)
  callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
    awk -v depth="$depth" -v frames="$frames" -v reads=$((2 * rounds + 1)) '
      /mt_python_read \[/ { gsub(",", "", $1); r = $1 / reads }
      /mt_python_mix \[/ { gsub(",", "", $1); m = $1 / reads }
      END { printf "%5d  %11d  %17.0f (%5.1f)  %17.0f\n", depth, frames, r, r / frames, m }'
done
