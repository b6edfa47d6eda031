#!/bin/sh
# What an older kernel's mechanisms cost (README, "Kernels"), measured on this
# kernel with the newer features taken away (MEMTRACK_KERNEL_FEATURES, as the
# kernel_fallbacks tests do): "best" is uprobe sessions and the kernel's own
# stop of a new child (Linux >= 6.13); "6.12" uprobe_multi links and children
# that stop themselves (Linux 6.6-6.12); "6.1" classic perf uprobes and
# children that stop themselves (before 6.6).
#  1. `record -- true` and `record --uprobes -- true`, wall s;
#  2. 20 fork+exec of /bin/true from a shell, on the fast path and with
#     --uprobes, wall s;
#  3. one allocator call through the uprobes: the probe floor `record`
#     measures at start (probe_floor_ns), and a malloc+free loop of 20,000
#     pairs with --uprobes, ns per pair.
# Medians of ROUNDS interleaved runs. Usage: bench/kernel_mechanisms.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-5}
wall() { start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'; }
printf 'i=0; while [ $i -lt 20 ]; do /bin/true; i=$((i+1)); done\n' >"$tmp/tree.sh"
features() {
  case $1 in
    best) echo "" ;;
    6.12) echo "-uprobe-sessions,-send-signal-task" ;;
    6.1) echo "-uprobe-sessions,-uprobe-multi,-send-signal-task" ;;
  esac
}

for _ in $(seq "$rounds"); do
  wall sh "$tmp/tree.sh" >>"$tmp/tree_untraced"
  for mode in best 6.12 6.1; do
    export MEMTRACK_KERNEL_FEATURES="$(features $mode)"
    wall "$memtrack" record -q --no-stacks -o "$tmp/t.zst" -- true >>"$tmp/true_fast_$mode"
    wall "$memtrack" record -q --no-stacks --uprobes -o "$tmp/t.zst" -- true >>"$tmp/true_uprobes_$mode"
    wall "$memtrack" record -q --no-stacks -o "$tmp/t.zst" -- sh "$tmp/tree.sh" >>"$tmp/tree_fast_$mode"
    wall "$memtrack" record -q --no-stacks --uprobes -o "$tmp/t.zst" -- sh "$tmp/tree.sh" >>"$tmp/tree_uprobes_$mode"
    "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" -- "$loop" 20000 >>"$tmp/loop_$mode"
    info_counter probe_floor_ns >>"$tmp/floor_$mode"
    unset MEMTRACK_KERNEL_FEATURES
  done
done

echo "medians of $rounds interleaved runs (best: uprobe sessions, the parent's fork stops new children; 6.12: uprobe_multi links, children stop themselves; 6.1: classic uprobes, children stop themselves)"
for what in true_fast true_uprobes tree_fast tree_uprobes loop floor; do
  case $what in
    true_fast) label="record -- true, wall s" ;;
    true_uprobes) label="record --uprobes -- true, wall s" ;;
    tree_fast) label="20 fork+exec, fast path, wall s (untraced $(median <"$tmp/tree_untraced"))" ;;
    tree_uprobes) label="20 fork+exec, --uprobes, wall s" ;;
    loop) label="malloc+free pair through uprobes, ns" ;;
    floor) label="probe floor measured at start, ns" ;;
  esac
  echo "$label: best $(median <"$tmp/${what}_best"), 6.12 $(median <"$tmp/${what}_6.12"), 6.1 $(median <"$tmp/${what}_6.1")"
done
