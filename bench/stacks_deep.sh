#!/bin/sh
# Cost per frame of walking a call path past the stack copy (live-stack reads)
# against walking it inside the copy: bench/deep_stack_loop at DEPTH 20, 100
# and 200 below main, with 1 KiB frames and an 8 KiB copy (all but
# the first few frames read live) and with 64-byte frames and a 32 KiB copy
# (every frame in the copy), under `memtrack record --uprobes --stacks` (the
# kernel walks) and with empty
# probes (the floor). Each malloc+free pair captures one stack. Medians of
# ROUNDS interleaved runs, and the machine's getppid() cost.
# Usage: bench/stacks_deep.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-50000}
rounds=${3:-5}
deep=$build/bench/deep_stack_loop
depths="20 100 200"

for _ in $(seq "$rounds"); do
  for depth in $depths; do
    "$memtrack" record -q --no-stacks --uprobes --empty-probes -o "$tmp/a.zst" -- "$deep" "$pairs" "$depth" 1024 >>"$tmp/floor_$depth"
    "$memtrack" record -q --uprobes --stacks --stack-budget 8192 -o "$tmp/a.zst" -- "$deep" "$pairs" "$depth" 1024 >>"$tmp/live_$depth"
    "$memtrack" record -q --uprobes --stacks --stack-budget 32768 -o "$tmp/a.zst" -- "$deep" "$pairs" "$depth" 64 >>"$tmp/copy_$depth"
  done
  "$deep" getppid 1000000 >>"$tmp/getppid"
done
"$memtrack" record -q --uprobes --stacks --stack-budget 8192 -o "$tmp/a.zst" -- "$deep" "$pairs" 200 1024 >/dev/null
"$memtrack" info --format json "$tmp/a.zst" >"$tmp/info.json"
live_reads=$(awk -F': ' '/"stack_live_reads"/ {gsub(/[ ,]/, "", $2); print $2; exit}' "$tmp/info.json")
complete=$(awk -F': ' '/"stack_walks_complete"/ {gsub(/[ ,]/, "", $2); print $2; exit}' "$tmp/info.json")

echo "ns per malloc+free pair (one stack captured per pair), medians of $rounds interleaved runs"
for depth in $depths; do
  echo "depth $depth: floor $(median <"$tmp/floor_$depth"), 1 KiB frames past an 8 KiB copy $(median <"$tmp/live_$depth"), 64 B frames in a 32 KiB copy $(median <"$tmp/copy_$depth")"
done
per_frame() { awk -v a="$(median <"$tmp/$1_20")" -v b="$(median <"$tmp/$1_200")" 'BEGIN{printf "%.1f", (b - a) / 180}'; }
echo "per frame, depth 20 to 200: live reads $(per_frame live) ns, in the copy $(per_frame copy) ns, floor $(per_frame floor) ns"
echo "getppid(): $(median <"$tmp/getppid") ns"
echo "depth 200, 1 KiB frames: $complete complete walks, $live_reads words read from the live stack"
