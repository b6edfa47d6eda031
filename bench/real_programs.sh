#!/bin/sh
# Stack capture on two real programs from Debian: definitions per 1,000
# allocations and artifact bytes per allocation, walk mode vs raw mode, and
# wall time against capture off.
# Usage: bench/real_programs.sh [BUILD_DIR]
set -eu
. "$(dirname "$0")/common.sh"

for program in sqlite python; do
  if [ $program = sqlite ]; then cmd="sqlite3 :memory:"; input="$here/work.sql"; else cmd="/usr/bin/python3 $here/work.py"; input=/dev/null; fi
  for mode in off walk raw; do
    flags="--no-stacks"; [ $mode != off ] && flags="--stack-mode $mode"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$memtrack" record -q $flags -o "$tmp/$program-$mode.zst" -- $cmd <"$input" >/dev/null
    end=$(date +%s.%N)
    "$memtrack" info --format json "$tmp/$program-$mode.zst" >"$tmp/info.json"
    events=$(figure "$tmp/info.json" events)
    defs=$(figure "$tmp/info.json" stack_definitions)
    allocs=$(figure "$tmp/info.json" allocations_with_stack)
    size=$(stat -c %s "$tmp/$program-$mode.zst")
    awk -v p=$program -v m=$mode -v e="$events" -v d="${defs:-0}" -v a="${allocs:-0}" -v s="$size" -v t0="$start" -v t1="$end" 'BEGIN {
      printf "%-7s %-5s wall %.2f s, %d events, %d allocations with stack, %d definitions (%.1f per 1000 allocations), %.1f bytes per event\n",
             p, m, t1 - t0, e, a, d, a ? 1000 * d / a : 0, s / e }'
  done
done
