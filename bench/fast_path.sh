#!/bin/sh
# The interposer fast path (record --fast-path) against the uprobe path, the
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

cat >"$tmp/work.cpp" <<'CPP'
#include <iostream>
#include <map>
#include <string>
#include <vector>
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 100; ++i) m[std::to_string(i)].push_back(i);
  std::cout << m.size() << "\n";
}
CPP

# --- 1. per call
for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  "$memtrack" record -q --fast-path -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/fast"
  "$memtrack" info "$tmp/a.zst" | awk '/^  interposed_processes:/ {print $2}' >>"$tmp/fast_interposed"
  "$memtrack" record -q -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/uprobes"
  "$memtrack" info "$tmp/a.zst" | awk '/^  syscall_ns:/ {print $2}' >>"$tmp/syscall"
  "$memtrack" record -q --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/floor"
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
    "$memtrack" record -q --fast-path -o "$tmp/a.zst" -- "$build/bench/$variant" "$pairs" cpu >>"$tmp/$variant.fast"
    "$memtrack" info "$tmp/a.zst" | awk '/^  interposed_processes:/ {print $2}' >>"$tmp/$variant.interposed"
    "$memtrack" record -q -o "$tmp/a.zst" -- "$build/bench/$variant" "$pairs" cpu >>"$tmp/$variant.uprobes"
    "$memtrack" info "$tmp/a.zst" | awk '/^  syscall_ns:/ {print $2}' >>"$tmp/$variant.syscall"
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
run() {  # run LABEL OUTFILE COMMAND...: appends "wall cpu" seconds
  label=$1; out=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >/dev/null 2>"$tmp/stderr" </dev/null || {
    echo "$label failed:"; cat "$tmp/stderr"; }
  awk '{printf "%s %.3f\n", $1, $2 + $3}' "$tmp/time" >>"$out"
}
for program in ${PROGRAMS:-python sqlite gxx}; do
  case $program in
    python) set -- env PYTHONMALLOC=malloc /usr/bin/python3 "$here/work.py" ;;
    sqlite) set -- sqlite3 :memory: -init "$here/work.sql" .quit ;;
    gxx) set -- g++ -O1 -c "$tmp/work.cpp" -o "$tmp/work.o" ;;
  esac
  for _ in $(seq "$rounds"); do
    run "$program untraced" "$tmp/$program.untraced" "$@"
    run "$program fast" "$tmp/$program.fast" "$memtrack" record -q --fast-path -o "$tmp/a.zst" -- "$@"
    run "$program uprobes" "$tmp/$program.uprobes" "$memtrack" record -q -o "$tmp/a.zst" -- "$@"
    run "$program heaptrack" "$tmp/$program.heaptrack" heaptrack -o "$tmp/ht" "$@"
    rm -f "$tmp"/ht*
  done
done
echo "whole programs: median wall s / CPU s of the run (slowdown vs untraced), $rounds interleaved runs"
for program in ${PROGRAMS:-python sqlite gxx}; do
  for mode in untraced fast uprobes heaptrack; do
    w=$(awk '{print $1}' "$tmp/$program.$mode" | median); c=$(awk '{print $2}' "$tmp/$program.$mode" | median)
    w0=$(awk '{print $1}' "$tmp/$program.untraced" | median); c0=$(awk '{print $2}' "$tmp/$program.untraced" | median)
    awk -v p=$program -v m=$mode -v w="$w" -v c="$c" -v w0="$w0" -v c0="$c0" 'BEGIN {
      printf "  %-7s %-10s wall %6.2f s (%5.1fx)  CPU %6.2f s (%5.1fx)\n", p, m, w, w / w0, c, c / c0 }'
  done
done
