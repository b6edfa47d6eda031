#!/bin/sh
# `memtrack report` on a 10 M-event artifact with 20,000 call paths over
# 5,000 call sites in libc
# (bench/make_report_trace.cpp): wall time and peak RSS per output format,
# median of 3 runs. The artifact is in the compact layout `record` writes;
# LAYOUT=records writes the records layout (--records-layout) instead.
# Usage: [LAYOUT=records] bench/report.sh [BUILD_DIR] (a Release build).
set -eu
. "$(dirname "$0")/common.sh"
events=${EVENTS:-10000000}
stacks=${STACKS:-20000}
addresses=${ADDRESSES:-5000}
"$build/bench/make_report_trace" "$tmp/trace.zst" "$events" "$stacks" "$addresses"
ls -l "$tmp/trace.zst" | awk '{printf "artifact: %d bytes\n", $5}'
for format in text json folded pprof; do
  for run in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$tmp/time.$run" "$memtrack" report --format "$format" -o "$tmp/out" "$tmp/trace.zst"
  done
  secs=$(cat "$tmp"/time.* | awk '{print $1}' | median)
  rss=$(cat "$tmp"/time.* | awk '{print $2}' | median)
  echo "$format: ${secs} s, peak RSS $((rss / 1024)) MiB (median of 3)"
done
