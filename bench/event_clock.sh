#!/bin/sh
# The interposer's clock (docs/BENCHMARKS.md, "Per intercepted call"): the
# program's CPU per malloc+free pair (bench/malloc_loop, thread CPU time)
# with the events stamped by the TSC (the default where TscClock::usable) and
# by clock_gettime (MEMTRACK_CLOCK=monotonic), with and without call paths,
# interleaved, medians; and the recorder's CPU per event on each.
# Usage: bench/event_clock.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-100000}
rounds=${3:-9}

recorder_ns() {
  "$memtrack" info "$tmp/a.zst" | awk '$1 == "recorder_user_us:" {u = $2} $1 == "recorder_system_us:" {s = $2}
    $1 == "interposer_events:" {e = $2} END {printf "%.0f\n", (u + s) * 1000 / e}'
}
for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  for stacks in stacks no-stacks; do
    flag=""; [ "$stacks" = no-stacks ] && flag=--no-stacks
    "$memtrack" record -q $flag -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/tsc.$stacks"
    [ "$(info_counter interposer_clock_tsc)" = 1 ] || { echo "the TSC is not used here: nothing to compare"; exit 1; }
    recorder_ns >>"$tmp/tsc_recorder.$stacks"
    MEMTRACK_CLOCK=monotonic "$memtrack" record -q $flag -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/mono.$stacks"
    recorder_ns >>"$tmp/mono_recorder.$stacks"
  done
done
u=$(median <"$tmp/untraced")
echo "CPU ns per malloc+free pair in the program, medians of $rounds interleaved runs of $pairs pairs; untraced $u"
for stacks in stacks no-stacks; do
  t=$(median <"$tmp/tsc.$stacks"); m=$(median <"$tmp/mono.$stacks")
  awk -v s="$stacks" -v u="$u" -v t="$t" -v m="$m" -v rt="$(median <"$tmp/tsc_recorder.$stacks")" \
    -v rm="$(median <"$tmp/mono_recorder.$stacks")" 'BEGIN {
    printf "  %-9s TSC %6.1f (%.1f ns added a call)  clock_gettime %6.1f (%.1f)  recorder ns/event: TSC %d, clock_gettime %d\n",
      s, t, (t - u) / 2, m, (m - u) / 2, rt, rm }'
done
