#!/bin/sh
# What each hold mode (record --hold signal|ptrace) costs: µs per new thread,
# per fork (+exit+wait), per signal the program receives, ns per malloc+free
# pair in steady state, and a run full of back-pressure pauses (a 16 KiB
# ring). Medians of ROUNDS interleaved runs.
# Usage: bench/hold_modes.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
costs=$build/bench/hold_costs
wall() { start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'; }
for _ in $(seq "$rounds"); do
  for mode in none signal ptrace; do
    rec=""; [ "$mode" != none ] && rec="$memtrack record -q --no-stacks --hold $mode -o $tmp/h.zst --"
    $rec "$costs" threads 300 >>"$tmp/threads_$mode"
    $rec "$costs" forks 100 >>"$tmp/forks_$mode"
    $rec "$costs" signals 3000 >>"$tmp/signals_$mode"
    $rec "$loop" 200000 >>"$tmp/pairs_$mode"
    [ "$mode" = none ] && continue
    wall $memtrack record -q --no-stacks --hold $mode --ring-mib 0.015625 -o "$tmp/p.zst" -- "$loop" 300000 >>"$tmp/pressure_$mode"
    "$memtrack" info "$tmp/p.zst" | awk '/backpressure_pauses:/ {print $2}' >>"$tmp/pauses_$mode"
  done
done
echo "medians of $rounds interleaved runs (untraced / --hold signal / --hold ptrace)"
for what in threads forks signals; do
  echo "$what, µs each: $(median <"$tmp/${what}_none") / $(median <"$tmp/${what}_signal") / $(median <"$tmp/${what}_ptrace")"
done
echo "malloc+free pair, ns: $(median <"$tmp/pairs_none") / $(median <"$tmp/pairs_signal") / $(median <"$tmp/pairs_ptrace")"
echo "300,000 pairs with a 16 KiB ring, s (pauses): signal $(median <"$tmp/pressure_signal") ($(median <"$tmp/pauses_signal")), ptrace $(median <"$tmp/pressure_ptrace") ($(median <"$tmp/pauses_ptrace"))"
