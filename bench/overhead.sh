#!/bin/sh
# Whole-program overhead of recording on the uprobe path: ns per malloc+free
# pair of a tight loop, untraced, under `memtrack record --uprobes`, under
# `memtrack record --uprobes --empty-probes` (the same probes doing nothing: the kernel's floor), and
# under heaptrack. Runs are interleaved; medians of ROUNDS runs are printed.
# Usage: bench/overhead.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-5}


for _ in $(seq "$rounds"); do
  "$loop" "$pairs" >>"$tmp/untraced"
  "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" -- "$loop" "$pairs" >>"$tmp/memtrack"
  "$memtrack" record -q --no-stacks --uprobes --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" >>"$tmp/floor"
  "$memtrack" record -q --no-stacks --uprobes --classic-uprobes -o "$tmp/a.zst" -- "$loop" "$pairs" >>"$tmp/classic"
  "$memtrack" record -q --no-stacks --uprobes --classic-uprobes --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" >>"$tmp/classic_floor"
  if command -v heaptrack >/dev/null; then
    heaptrack -o "$tmp/ht" "$loop" "$pairs" 2>/dev/null | grep -E '^[0-9.]+$' >>"$tmp/heaptrack" || true
    rm -f "$tmp"/ht*
  fi
done

u=$(median <"$tmp/untraced"); m=$(median <"$tmp/memtrack"); f=$(median <"$tmp/floor")
c=$(median <"$tmp/classic"); cf=$(median <"$tmp/classic_floor")
echo "ns per malloc+free pair (median of $rounds interleaved runs, $pairs pairs each)"
echo "untraced                         $u"
echo "memtrack (uprobe sessions)       $m"
echo "empty probes (floor)             $f"
echo "memtrack (classic uprobes)       $c"
echo "empty classic probes (floor)     $cf"
[ -s "$tmp/heaptrack" ] && echo "heaptrack                        $(median <"$tmp/heaptrack")"
awk -v m="$m" -v f="$f" -v c="$c" -v cf="$cf" -v u="$u" 'BEGIN {
  printf "memtrack / floor                 %.2fx\n", (m - u) / (f - u);
  printf "classic / classic floor          %.2fx\n", (c - u) / (cf - u);
  printf "per intercepted call: memtrack %.0f ns, floor %.0f ns (3 probes per pair: malloc entry+return, free)\n", (m - u) / 2, (f - u) / 2 }'
