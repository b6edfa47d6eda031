#!/bin/sh
# The probe floor `record` measures at start (trailer counter probe_floor_ns:
# one call of a function probed at entry and return by an empty program)
# against an independent figure: the CPU time per malloc+free pair of
# bench/malloc_loop untraced and under `record --empty-probes` (three probe
# hits per pair, two per floor call: a pair costs ~1.5 floors). CPU time, not
# wall time: other tasks sharing the CPUs inflate wall time, not CPU time.
# Usage: bench/probe_cost.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-20000}
rounds=${3:-5}

for _ in $(seq "$rounds"); do
  "$loop" "$pairs" 0 cpu >>"$tmp/untraced"
  "$memtrack" record -q --no-stacks --empty-probes -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/empty"
  "$memtrack" info "$tmp/a.zst" | awk '/^  probe_floor_ns:/ {print $2}' >>"$tmp/floor"
  "$memtrack" info "$tmp/a.zst" | awk '/^  syscall_ns:/ {print $2}' >>"$tmp/syscall"
done

u=$(median <"$tmp/untraced"); e=$(median <"$tmp/empty")
echo "medians of $rounds interleaved runs, $pairs pairs per round"
echo "probe_floor_ns (measured by record at start)   $(median <"$tmp/floor")"
echo "syscall_ns (getppid, measured by record)       $(median <"$tmp/syscall")"
echo "CPU ns per pair, untraced                      $u"
echo "CPU ns per pair, empty probes                  $e"
awk -v u="$u" -v e="$e" 'BEGIN { printf "empty probes per floor call ((pair - untraced) / 1.5)  %.0f\n", (e - u) / 1.5 }'
echo "probe_floor_ns of each run: $(tr '\n' ' ' <"$tmp/floor")"
