#!/bin/sh
# The cost of the memory records (Rss from rss_stat, mappings outside the
# allocators): ns per malloc+free pair of bench/malloc_loop (CPU time) and
# ns per page fault of bench/touch_pages, untraced, recorded, and recorded
# with --no-memory-records; the Rss changes seen and records kept of one
# recorded touch_pages run, and the machine's syscall cost (getppid, from
# the trailer). Runs are interleaved; medians of ROUNDS runs.
# Usage: bench/memory.sh [BUILD_DIR] [PAIRS] [ROUNDS] [MIB]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-5}
mib=${4:-256}
touch=$build/bench/touch_pages

for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/loop_untraced"
  "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/loop_memory"
  "$memtrack" record -q --no-stacks --no-memory-records -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/loop_off"
  "$touch" "$mib" 3 >>"$tmp/touch_untraced"
  "$memtrack" record -q --no-stacks -o "$tmp/t.zst" -- "$touch" "$mib" 3 >>"$tmp/touch_memory"
  "$memtrack" record -q --no-stacks --no-memory-records -o "$tmp/a.zst" -- "$touch" "$mib" 3 >>"$tmp/touch_off"
done
counter() { "$memtrack" info "$tmp/t.zst" | awk -v k="$1:" '$1 == k {print $2}'; }
echo "median of $rounds interleaved runs"
echo "malloc+free pair, ns (CPU):  untraced $(median <"$tmp/loop_untraced")  memory records $(median <"$tmp/loop_memory")  --no-memory-records $(median <"$tmp/loop_off")"
echo "page touched, ns (CPU):      untraced $(median <"$tmp/touch_untraced")  memory records $(median <"$tmp/touch_memory")  --no-memory-records $(median <"$tmp/touch_off")"
echo "last touch_pages recording:  rss_changes $(counter rss_changes)  rss_records $(counter rss_records)  syscall_ns $(counter syscall_ns)"
