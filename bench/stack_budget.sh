#!/bin/sh
# The stack copy budget on real programs: for each budget (4, 8, 16, 32 KiB),
# the share of captured stacks whose walk completed, how the others ended,
# and the cost per captured stack (the CPU time of the recorded process tree
# against capture off, divided by the stacks captured: probe handlers run in
# the target's threads, and CPU time does not grow with other load on the
# machine as wall time does), on Debian's sqlite3, python3 (PYTHONMALLOC=malloc, so
# every object allocation reaches malloc), g++ (cc1plus compiling a small C++
# file) and a deep recursion (bench/deep_stack_loop: 200 frames of 1 KiB).
# Medians of ROUNDS interleaved runs.
# Usage: bench/stack_budget.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
budgets="4096 8192 16384 32768"

cat >"$tmp/work.cpp" <<'CPP'
#include <map>
#include <string>
#include <vector>
#include <algorithm>
std::map<std::string, std::vector<int>> index_words(const std::vector<std::string>& words) {
  std::map<std::string, std::vector<int>> index;
  for (size_t i = 0; i < words.size(); ++i) index[words[i]].push_back(int(i));
  for (auto& [word, places] : index) std::sort(places.begin(), places.end());
  return index;
}
CPP

record() {  # record PROGRAM OUTPUT [FLAGS...]: runs it under `sh -c '...; times'`
  program=$1 out=$2; shift 2
  case $program in
    sqlite) cmd="sqlite3 :memory: <$here/work.sql" ;;
    python) cmd="PYTHONMALLOC=malloc /usr/bin/python3 $here/work.py" ;;
    gxx) cmd="g++ -O2 -c $tmp/work.cpp -o $tmp/work.o" ;;
    deep) cmd="$build/bench/deep_stack_loop 2000 200 1024" ;;
  esac
  "$memtrack" record -q "$@" -o "$out" -- sh -c "$cmd >/dev/null; times"
}
# The children's user and system time from `times` (second line), in s.
cpu_seconds() {
  tail -n 1 | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.3f\n", t }'
}

programs="sqlite python gxx deep"
for _ in $(seq "$rounds"); do
  for program in $programs; do
    for budget in off $budgets; do
      out=$tmp/$program-$budget.zst
      if [ "$budget" = off ]; then record $program "$out" --no-stacks; else record $program "$out" --stacks --stack-budget "$budget"; fi |
        cpu_seconds >>"$tmp/cpu-$program-$budget"
    done
  done
done

echo "medians of $rounds interleaved runs; cost = (CPU s - CPU s without capture) / stacks captured"
printf '%-7s %6s %9s %10s %9s %9s %8s %8s %10s %10s\n' program budget cpu_s captured complete truncated no_rule other us_per_stack artifact
for program in $programs; do
  off=$(median <"$tmp/cpu-$program-off")
  for budget in $budgets; do
    out=$tmp/$program-$budget.zst
    "$memtrack" info --format json "$out" >"$tmp/info.json"
    captured=$(figure "$tmp/info.json" stacks_captured)
    complete=$(figure "$tmp/info.json" stack_walks_complete)
    truncated=$(figure "$tmp/info.json" stack_walks_truncated)
    no_rule=$(figure "$tmp/info.json" stack_walks_no_rule)
    wall=$(median <"$tmp/cpu-$program-$budget")
    awk -v p=$program -v b=$budget -v w="$wall" -v o="$off" -v c="$captured" -v k="$complete" -v t="$truncated" \
        -v n="$no_rule" -v s="$(stat -c %s "$out")" 'BEGIN {
      printf "%-7s %6d %9.2f %10d %8.1f%% %8.1f%% %7.1f%% %7.1f%% %10.2f %9.0fK\n", p, b, w, c, 100 * k / c, 100 * t / c,
             100 * n / c, 100 * (c - k - t - n) / c, 1e6 * (w - o) / c, s / 1024 }'
  done
done
