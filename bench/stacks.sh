#!/bin/sh
# Cost of stack capture per allocation: bench/malloc_loop at ~15 frames
# (DEPTH 11 below main) and at ~125 frames (DEPTH 121), under `memtrack
# record --uprobes` (the kernel walks) with capture off, walk mode and raw mode, and with empty probes
# (the floor). Each malloc+free pair captures one stack (frees capture none).
# Medians of ROUNDS interleaved runs. Usage: bench/stacks.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-100000}
rounds=${3:-5}

for _ in $(seq "$rounds"); do
  for depth in 11 121; do
    "$memtrack" record -q --no-stacks --uprobes --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" $depth >>"$tmp/floor_$depth"
    "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" -- "$loop" "$pairs" $depth >>"$tmp/off_$depth"
    "$memtrack" record -q --uprobes --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" $depth >>"$tmp/walk_$depth"
    "$memtrack" record -q --uprobes --stacks --stack-mode raw -o "$tmp/a.zst" -- "$loop" "$pairs" $depth >>"$tmp/raw_$depth"
  done
done
"$memtrack" record -q --uprobes --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 11 >/dev/null
defs=$("$memtrack" info --format json "$tmp/a.zst" | awk -F': ' '/"stack_definitions"/ {gsub(/,/, "", $2); print $2; exit}')

echo "ns per malloc+free pair (one stack captured per pair), medians of $rounds interleaved runs"
for depth in 11 121; do
  f=$(median <"$tmp/floor_$depth"); o=$(median <"$tmp/off_$depth")
  w=$(median <"$tmp/walk_$depth"); r=$(median <"$tmp/raw_$depth")
  echo "frames ~$((depth + 4)): floor $f, capture off $o, walk $w, raw $r; walk adds $(awk -v w="$w" -v o="$o" 'BEGIN{printf "%.0f", w - o}') ns"
done
w15=$(median <"$tmp/walk_11"); w125=$(median <"$tmp/walk_121")
echo "walk cost per extra frame: $(awk -v a="$w15" -v b="$w125" 'BEGIN{printf "%.1f", (b - a) / 110}') ns"
echo "definitions for $pairs allocations at ~15 frames (walk): $defs"
