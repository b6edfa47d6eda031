#!/bin/sh
# Snapshots while recording (issue 28): the python3 service of
# bench/service.py (PYTHONMALLOC=malloc: every object a malloc) recorded by
# `memtrack record --pid` for DURATION seconds, once without snapshots and
# once with --snapshot-every INTERVAL. Prints each snapshot's line (its
# moment and what it took: closing the frame, `report --at` of the artifact
# so far in a child process at nice 10, linking the profile), the events
# written and lost of each run, and the service's dicts per second of its
# own CPU and per wall second in each. Usage:
# bench/snapshots.sh [BUILD_DIR] [DURATION] [INTERVAL]
set -eu
. "$(dirname "$0")/common.sh"
duration=${2:-20}
interval=${3:-5}

head -c 8 /dev/zero >"$tmp/counter"
PYTHONMALLOC=malloc python3 "$here/service.py" "$tmp/counter" &
service=$!
trap 'kill $service 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1

for mode in plain snapshots; do
  flags=""
  [ "$mode" = snapshots ] && flags="--snapshot-every $interval"
  # shellcheck disable=SC2086
  "$memtrack" record --pid "$service" --duration "$duration" -o "$tmp/$mode.zst" $flags 2>"$tmp/$mode.log" &
  recorder=$!
  wait_for "$tmp/$mode.log" "Ctrl-C to stop"
  b0=$(built); c0=$(cpu); t0=$(now)
  wait "$recorder"
  b1=$(built); c1=$(cpu); t1=$(now)
  echo "$mode:"
  grep -E "snapshot|events written" "$tmp/$mode.log" | sed 's/^/  /'
  awk -v b="$((b1 - b0))" -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" 'BEGIN {
    printf "  service: %.0f dicts per CPU-s, %.0f per wall s\n", b / (c1 - c0), b / (t1 - t0) }'
  echo "  artifact: $(wc -c <"$tmp/$mode.zst") bytes"
done
