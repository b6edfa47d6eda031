#!/bin/sh
# The artifact's size and the report's speed against heaptrack on the same
# programs (python3 PYTHONMALLOC=malloc bench/work.py, sqlite3 bench/work.sql,
# a g++ -O1 compile of bench/work.cpp), interleaved: memtrack with call paths
# in the compact layout (the default) and in the records layout
# (--records-layout, format 2), heaptrack. Then `memtrack report` (text) and
# `heaptrack_print` on those files: wall and CPU s, medians of ROUNDS runs.
# Usage: bench/artifact_size.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
for _ in $(seq "$rounds"); do
  for program in python sqlite gxx; do
    run_program "$program" compact "$memtrack" record -q -o "$tmp/$program.compact.zst" --
    run_program "$program" records "$memtrack" record -q --records-layout -o "$tmp/$program.records.zst" --
    rm -f "$tmp"/ht."$program"*
    run_program "$program" heaptrack heaptrack -o "$tmp/ht.$program"
    stat -c %s "$tmp/$program.compact.zst" >>"$tmp/$program.compact.bytes"
    stat -c %s "$tmp/$program.records.zst" >>"$tmp/$program.records.bytes"
    stat -c %s "$tmp"/ht."$program"* >>"$tmp/$program.heaptrack.bytes"
    timed "report" "$tmp/$program.report" "$memtrack" report "$tmp/$program.compact.zst"
    timed "report" "$tmp/$program.report-records" "$memtrack" report "$tmp/$program.records.zst"
    timed "heaptrack_print" "$tmp/$program.print" heaptrack_print "$tmp"/ht."$program"*
  done
done
echo "median artifact bytes (x heaptrack's) and report wall / CPU s (x heaptrack_print's), $rounds interleaved runs"
for program in python sqlite gxx; do
  ht=$(median <"$tmp/$program.heaptrack.bytes")
  for layout in compact records; do
    b=$(median <"$tmp/$program.$layout.bytes")
    awk -v p="$program" -v l="$layout" -v b="$b" -v h="$ht" 'BEGIN { printf "  %-6s %-8s %10d bytes (%5.2fx)\n", p, l, b, b / h }'
  done
  echo "  $program heaptrack $ht bytes"
  pw=$(awk '{print $1}' "$tmp/$program.print" | median); pc=$(awk '{print $2}' "$tmp/$program.print" | median)
  for kind in report report-records; do
    w=$(awk '{print $1}' "$tmp/$program.$kind" | median); c=$(awk '{print $2}' "$tmp/$program.$kind" | median)
    awk -v p="$program" -v k="$kind" -v w="$w" -v c="$c" -v pw="$pw" -v pc="$pc" 'BEGIN {
      printf "  %-6s %-15s wall %5.2f s (%4.2fx)  CPU %5.2f s (%4.2fx)\n", p, k, w, w / pw, c, c / pc }'
  done
  echo "  $program heaptrack_print wall $pw s CPU $pc s"
done
