#!/bin/sh
# Call paths on the fast path (record --stacks, the default: the interposer
# walks its own stack) against the uprobe path with --stacks (the kernel
# walks it) and heaptrack (which always records stacks), in one run:
#  1. per intercepted call: CPU ns per malloc+free pair of bench/malloc_loop
#     (the thread's CPU time), with the getppid() cost record measured;
#  2. whole programs from Debian: python3 (PYTHONMALLOC=malloc), sqlite3 and a
#     g++ -O1 compile, wall time and the CPU time of everything the run started.
# Runs are interleaved; medians of ROUNDS runs. The walk counters of the last
# fast run say how many walks completed in the interposer.
# BEFORE=DIR adds the fast path of the memtrack executable in DIR (another
# build: DIR/src/cli/memtrack, or a directory holding memtrack and its
# libmemtrack-interpose.so) to the whole-program runs, interleaved, to
# compare two builds in one run; UPROBES=0 leaves the uprobe path out of them
# (minutes per python3 run).
# The cache of files' unwind rules (record/unwind_rules/rule_cache.h) lives in the run's
# scratch directory: `fast-cold` runs with it emptied first, `fast` after it
# (warm: the rules the cold run stored), so both are shown.
# Usage: [PROGRAMS="python sqlite gxx"] [BEFORE=DIR] [UPROBES=0] bench/fast_path_stacks.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-3}
export XDG_CACHE_HOME="$tmp/cache"
modes="untraced ${before:+before} fast-cold fast"
[ "${UPROBES:-1}" = 0 ] || modes="$modes uprobes"
modes="$modes heaptrack"

walks() {  # the interposer's walk counters of the last recording
  "$memtrack" info "$tmp/a.zst" | awk '/^  interposer_(walks|stack_def)/ {printf "%s %s ", $1, $2}'
}

# --- 1. per call
for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  "$memtrack" record -q --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/fast"
  info_counter interposed_processes >>"$tmp/fast_interposed"
  walks >"$tmp/fast_walks"
  "$memtrack" record -q --uprobes --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/uprobes"
  info_counter syscall_ns >>"$tmp/syscall"
  heaptrack -o "$tmp/ht" "$loop" "$pairs" 0 cpu 2>/dev/null | grep -E '^[0-9.]+$' >>"$tmp/heaptrack" || true
  rm -f "$tmp"/ht*
done
u=$(median <"$tmp/untraced"); f=$(median <"$tmp/fast"); p=$(median <"$tmp/uprobes"); h=$(median <"$tmp/heaptrack")
echo "per call with stacks: CPU ns per malloc+free pair (2 calls), medians of $rounds interleaved runs, $pairs pairs"
echo "  getppid() syscall_ns (record's measure)        $(median <"$tmp/syscall")"
echo "  untraced                                       $u"
echo "  fast path --stacks (interposed: $(tr '\n' ' ' <"$tmp/fast_interposed"))  $f"
echo "  uprobe path --stacks                           $p"
echo "  heaptrack                                      $h"
echo "  last fast run: $(cat "$tmp/fast_walks")"
awk -v u="$u" -v f="$f" -v p="$p" -v h="$h" 'BEGIN {
  printf "  per call added: fast %.1f ns, uprobes %.0f ns, heaptrack %.1f ns\n", (f-u)/2, (p-u)/2, (h-u)/2;
  printf "  uprobes / fast: %.0fx; heaptrack / fast: %.2fx\n", (p-u)/(f-u), (h-u)/(f-u) }'

# --- 2. whole programs
for program in ${PROGRAMS:-python sqlite gxx}; do
  for _ in $(seq "$rounds"); do
    run_program "$program" untraced
    [ -z "$before" ] || run_program "$program" before "$before" record -q $before_fast --stacks -o "$tmp/a.zst" --
    rm -rf "$XDG_CACHE_HOME"
    run_program "$program" fast-cold "$memtrack" record -q --stacks -o "$tmp/a.zst" --
    run_program "$program" fast "$memtrack" record -q --stacks -o "$tmp/a.zst" --
    walks >"$tmp/$program.walks"
    [ "${UPROBES:-1}" = 0 ] || run_program "$program" uprobes "$memtrack" record -q --uprobes --stacks -o "$tmp/a.zst" --
    run_program "$program" heaptrack heaptrack -o "$tmp/ht"
    rm -f "$tmp"/ht*
  done
done
echo "whole programs with stacks: median wall s / CPU s of the run (slowdown vs untraced), $rounds interleaved runs; load average now $(cut -d" " -f1-3 /proc/loadavg)"
for program in ${PROGRAMS:-python sqlite gxx}; do
  program_summary "$program" $modes
  echo "  $program last fast run: $(cat "$tmp/$program.walks")"
done
