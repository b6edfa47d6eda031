#!/bin/sh
# Call paths on the fast path (record --fast-path --stacks: the interposer
# walks its own stack) against the uprobe path with --stacks (the kernel
# walks it) and heaptrack (which always records stacks), in one run:
#  1. per intercepted call: CPU ns per malloc+free pair of bench/malloc_loop
#     (the thread's CPU time), with the getppid() cost record measured;
#  2. whole programs from Debian: python3 (PYTHONMALLOC=malloc), sqlite3 and a
#     g++ -O1 compile, wall time and the CPU time of everything the run started.
# Runs are interleaved; medians of ROUNDS runs. The walk counters of the last
# fast run say how many walks completed in the interposer.
# Usage: [PROGRAMS="python sqlite gxx"] bench/fast_path_stacks.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-3}

cat >"$tmp/work.sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, 'name-' || i, i * 0.5 FROM n;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(value) FROM t WHERE name LIKE 'name-1%';
SELECT name FROM t ORDER BY value DESC LIMIT 5;
SQL
cat >"$tmp/work.py" <<'PY'
import collections, json, re
words = [f"w{i % 997}" for i in range(200000)]
counts = collections.Counter(words)
text = json.dumps({k: v for k, v in counts.items()})
data = json.loads(text)
print(len(data), len(re.findall(r"w[0-9]+", " ".join(words[:50000]))))
PY
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

walks() {  # the interposer's walk counters of the last recording
  "$memtrack" info "$tmp/a.zst" | awk '/^  interposer_(walks|stack_def)/ {printf "%s %s ", $1, $2}'
}

# --- 1. per call
for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  "$memtrack" record -q --fast-path --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/fast"
  "$memtrack" info "$tmp/a.zst" | awk '/^  interposed_processes:/ {print $2}' >>"$tmp/fast_interposed"
  walks >"$tmp/fast_walks"
  "$memtrack" record -q --stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/uprobes"
  "$memtrack" info "$tmp/a.zst" | awk '/^  syscall_ns:/ {print $2}' >>"$tmp/syscall"
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
run() {  # run LABEL OUTFILE COMMAND...: appends "wall cpu" seconds
  label=$1; out=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >/dev/null 2>"$tmp/stderr" </dev/null || {
    echo "$label failed:"; cat "$tmp/stderr"; }
  awk '{printf "%s %.3f\n", $1, $2 + $3}' "$tmp/time" >>"$out"
}
for program in ${PROGRAMS:-python sqlite gxx}; do
  case $program in
    python) set -- env PYTHONMALLOC=malloc /usr/bin/python3 "$tmp/work.py" ;;
    sqlite) set -- sqlite3 :memory: -init "$tmp/work.sql" .quit ;;
    gxx) set -- g++ -O1 -c "$tmp/work.cpp" -o "$tmp/work.o" ;;
  esac
  for _ in $(seq "$rounds"); do
    run "$program untraced" "$tmp/$program.untraced" "$@"
    run "$program fast" "$tmp/$program.fast" "$memtrack" record -q --fast-path --stacks -o "$tmp/a.zst" -- "$@"
    walks >"$tmp/$program.walks"
    run "$program uprobes" "$tmp/$program.uprobes" "$memtrack" record -q --stacks -o "$tmp/a.zst" -- "$@"
    run "$program heaptrack" "$tmp/$program.heaptrack" heaptrack -o "$tmp/ht" "$@"
    rm -f "$tmp"/ht*
  done
done
echo "whole programs with stacks: median wall s / CPU s of the run (slowdown vs untraced), $rounds interleaved runs"
for program in ${PROGRAMS:-python sqlite gxx}; do
  for mode in untraced fast uprobes heaptrack; do
    w=$(awk '{print $1}' "$tmp/$program.$mode" | median); c=$(awk '{print $2}' "$tmp/$program.$mode" | median)
    w0=$(awk '{print $1}' "$tmp/$program.untraced" | median); c0=$(awk '{print $2}' "$tmp/$program.untraced" | median)
    awk -v p=$program -v m=$mode -v w="$w" -v c="$c" -v w0="$w0" -v c0="$c0" 'BEGIN {
      printf "  %-7s %-10s wall %6.2f s (%5.1fx)  CPU %6.2f s (%5.1fx)\n", p, m, w, w / w0, c, c / c0 }'
  done
  echo "  $program last fast run: $(cat "$tmp/$program.walks")"
done
