#!/bin/sh
# The interposer fast path (record's default) against the uprobe path (--uprobes), the
# uprobe floor (--empty-probes) and heaptrack, in one run:
#  1. per intercepted call: CPU ns per malloc+free pair of bench/malloc_loop
#     (the thread's CPU time: other agents' load inflates wall time only);
#  2. whole programs from Debian: python3 (PYTHONMALLOC=malloc), sqlite3 and a
#     g++ -O1 compile, wall time and the CPU time of everything the run
#     started (the recorder or heaptrack's interpreter included).
# Runs are interleaved; medians of ROUNDS runs. Also prints the getppid() cost
# record measured (syscall_ns). 1b. does the same for operator new/delete
# (bench/new_loop.cpp). Usage: [PROGRAMS="python sqlite gxx"] bench/fast_path.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-3}

# --- 1. per call
for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/fast"
  info_counter interposed_processes >>"$tmp/fast_interposed"
  "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/uprobes"
  info_counter syscall_ns >>"$tmp/syscall"
  "$memtrack" record -q --no-stacks --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/floor"
  heaptrack -o "$tmp/ht" "$loop" "$pairs" 0 cpu 2>/dev/null | grep -E '^[0-9.]+$' >>"$tmp/heaptrack" || true
  rm -f "$tmp"/ht*
done
u=$(median <"$tmp/untraced"); f=$(median <"$tmp/fast"); p=$(median <"$tmp/uprobes"); e=$(median <"$tmp/floor")
h=$(median <"$tmp/heaptrack")
echo "per call: CPU ns per malloc+free pair (2 calls), medians of $rounds interleaved runs, $pairs pairs"
echo "  getppid() syscall_ns (record's measure)  $(median <"$tmp/syscall")"
echo "  untraced                                 $u"
echo "  fast path (interposed processes: $(tr '\n' ' ' <"$tmp/fast_interposed"))  $f"
echo "  uprobe path                              $p"
echo "  empty probes (uprobe floor)              $e"
echo "  heaptrack                                $h"
awk -v u="$u" -v f="$f" -v p="$p" -v e="$e" -v h="$h" 'BEGIN {
  printf "  per call added: fast %.1f ns, uprobes %.0f ns, floor %.0f ns, heaptrack %.1f ns\n", (f-u)/2, (p-u)/2, (e-u)/2, (h-u)/2;
  printf "  floor / fast: %.0fx; heaptrack / fast: %.2fx\n", (e-u)/(f-u), (h-u)/(f-u) }'

# --- 1b. per call of operator new/delete: libstdc++'s (they call malloc and
# free, which the interposer records), and libjemalloc.so's own (recorded at
# the operator by the interposer's wrapper, at the operator's probes by the
# uprobe path).
for variant in new_loop new_loop_jemalloc; do
  [ -x "$build/bench/$variant" ] || { echo "$variant: not built"; continue; }
  for _ in $(seq "$rounds"); do
    "$build/bench/$variant" "$pairs" cpu >>"$tmp/$variant.untraced"
    "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- "$build/bench/$variant" "$pairs" cpu >>"$tmp/$variant.fast"
    info_counter interposed_processes >>"$tmp/$variant.interposed"
    "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" -- "$build/bench/$variant" "$pairs" cpu >>"$tmp/$variant.uprobes"
    info_counter syscall_ns >>"$tmp/$variant.syscall"
    heaptrack -o "$tmp/ht" "$build/bench/$variant" "$pairs" cpu 2>/dev/null | grep -E '^[0-9.]+$' \
      >>"$tmp/$variant.heaptrack" || true
    rm -f "$tmp"/ht*
  done
  u=$(median <"$tmp/$variant.untraced"); f=$(median <"$tmp/$variant.fast"); p=$(median <"$tmp/$variant.uprobes")
  h=$(median <"$tmp/$variant.heaptrack")
  echo "$variant: CPU ns per new+delete pair (2 calls), medians of $rounds interleaved runs, $pairs pairs"
  echo "  getppid() syscall_ns (record's measure)  $(median <"$tmp/$variant.syscall")"
  echo "  untraced $u, fast path $f (interposed: $(tr '\n' ' ' <"$tmp/$variant.interposed")), uprobes $p, heaptrack $h"
  awk -v u="$u" -v f="$f" -v p="$p" -v h="$h" 'BEGIN {
    printf "  per call added: fast %.1f ns, uprobes %.0f ns, heaptrack %.1f ns; uprobes / fast: %.0fx\n",
           (f-u)/2, (p-u)/2, (h-u)/2, (p-u)/(f-u) }'
done

# --- 2. whole programs
for program in ${PROGRAMS:-python sqlite gxx}; do
  for _ in $(seq "$rounds"); do
    run_program "$program" untraced
    run_program "$program" fast "$memtrack" record -q --no-stacks -o "$tmp/a.zst" --
    run_program "$program" uprobes "$memtrack" record -q --no-stacks --uprobes -o "$tmp/a.zst" --
    run_program "$program" heaptrack heaptrack -o "$tmp/ht"
    rm -f "$tmp"/ht*
  done
done
echo "whole programs: median wall s / CPU s of the run (slowdown vs untraced), $rounds interleaved runs"
for program in ${PROGRAMS:-python sqlite gxx}; do
  program_summary "$program" untraced fast uprobes heaptrack
done
