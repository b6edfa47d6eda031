#!/bin/sh
# Per-process probes vs global probes, and start-up/tear-down time.
#  1. what recording costs a process memtrack does NOT trace (ns per
#     malloc+free pair of a loop running beside `memtrack record -- sleep`);
#  2. a process tree: 200 fork+exec of /bin/true from a shell, wall time;
#  3. `memtrack record -- true`, wall time.
# Medians of ROUNDS interleaved runs. Usage: bench/attach_modes.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-5}
wall() { start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'; }
printf 'i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done\n' >"$tmp/tree.sh"

for _ in $(seq "$rounds"); do
  "$loop" 200000 >>"$tmp/other_untraced"
  for mode in per-process global; do
    flag=""; [ "$mode" = global ] && flag=--global-probes
    "$memtrack" record -q --no-stacks $flag -o "$tmp/bg.zst" -- sleep 3 &
    sleep 0.5
    "$loop" 200000 >>"$tmp/other_$mode"
    wait
    wall "$memtrack" record -q --no-stacks $flag -o "$tmp/t.zst" -- sh "$tmp/tree.sh" >>"$tmp/tree_$mode"
    wall "$memtrack" record -q --no-stacks $flag -o "$tmp/t.zst" -- true >>"$tmp/true_$mode"
  done
  wall sh "$tmp/tree.sh" >>"$tmp/tree_untraced"
  wall true >>"$tmp/true_untraced"
done

echo "medians of $rounds interleaved runs"
echo "untracked process, ns per malloc+free pair: untraced $(median <"$tmp/other_untraced"), beside per-process recording $(median <"$tmp/other_per-process"), beside global recording $(median <"$tmp/other_global")"
echo "200 fork+exec, s: untraced $(median <"$tmp/tree_untraced"), per-process $(median <"$tmp/tree_per-process"), global $(median <"$tmp/tree_global")"
echo "record -- true, s: per-process $(median <"$tmp/true_per-process"), global $(median <"$tmp/true_global")"
