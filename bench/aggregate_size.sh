#!/bin/sh
# Bounded output for long runs (issue 28): the python3 service of
# bench/service.py (PYTHONMALLOC=malloc: every object a malloc) recorded by
# `memtrack record --pid --duration D`, for each D of DURATIONS, whole and
# with --aggregate, one after the other on the same process. Prints per run
# the artifact's bytes, the events recorded, the recorder's CPU seconds and
# peak RSS (its trailer's recorder_* counters), the service's dicts per second while attached, and the time
# `report` takes on the artifact. With COMPARE=1, each whole recording is also
# aggregated by `convert --aggregate` and the JSON reports of both compared
# (the same run: its figures must be identical). Usage:
# [COMPARE=1] bench/aggregate_size.sh [BUILD_DIR] [DURATIONS (default "10 60")] [MODES (default "whole aggregate")]
set -eu
. "$(dirname "$0")/common.sh"
durations=${2:-10 60}
modes=${3:-whole aggregate}

head -c 8 /dev/zero >"$tmp/counter"
PYTHONMALLOC=malloc python3 "$here/service.py" "$tmp/counter" &
service=$!
trap 'kill $service 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1

printf '%-9s %6s %12s %12s %9s %9s %12s %9s\n' mode secs "file bytes" events "rec CPU" "rec RSS" "dicts/s" "report s"
for duration in $durations; do
  for mode in $modes; do
    flag=""
    [ "$mode" = aggregate ] && flag=--aggregate
    # shellcheck disable=SC2086
    "$memtrack" record --pid "$service" --duration "$duration" -o "$tmp/$mode.zst" $flag 2>"$tmp/log" &
    recorder=$!
    wait_for "$tmp/log" "Ctrl-C to stop"
    b0=$(built); t0=$(now)
    wait "$recorder"
    b1=$(built); t1=$(now)
    "$memtrack" info --format json "$tmp/$mode.zst" >"$tmp/info.json" || true
    # The ring's events and the interposer's; the recorder's cost from the trailer.
    events=$(($(figure "$tmp/info.json" events_received) + $(figure "$tmp/info.json" interposer_events)))
    cpu_us=$(($(figure "$tmp/info.json" recorder_user_us) + $(figure "$tmp/info.json" recorder_system_us)))
    rss_kib=$(figure "$tmp/info.json" recorder_max_rss_kib)
    r0=$(now)
    "$memtrack" report -o /dev/null "$tmp/$mode.zst"
    r1=$(now)
    awk -v m="$mode" -v d="$duration" -v size="$(wc -c <"$tmp/$mode.zst")" -v ev="$events" \
        -v cpu="$cpu_us" -v rss="$rss_kib" -v b="$((b1 - b0))" -v t0="$t0" -v t1="$t1" -v r0="$r0" -v r1="$r1" 'BEGIN {
      printf "%-9s %6d %12d %12.0f %9.2f %6.0f MiB %12.0f %9.2f\n", m, d, size, ev, cpu / 1e6, rss / 1024, b / (t1 - t0), r1 - r0 }'
    if [ "$mode" = whole ] && [ "${COMPARE:-0}" = 1 ]; then
      "$memtrack" convert --aggregate "$tmp/whole.zst" "$tmp/converted.zst"
      "$memtrack" report --format json -o "$tmp/whole.json" "$tmp/whole.zst"
      "$memtrack" report --format json -o "$tmp/converted.json" "$tmp/converted.zst"
      # The one difference allowed: the header's "aggregated" feature (a
      # line of its own; the commas before it are left out of both).
      sed '/^ *"aggregated"$/d; s/,$//' "$tmp/converted.json" >"$tmp/converted.plain.json"
      sed 's/,$//' "$tmp/whole.json" >"$tmp/whole.plain.json"
      same=no
      cmp -s "$tmp/whole.plain.json" "$tmp/converted.plain.json" && same=yes
      echo "  convert --aggregate of it: $(wc -c <"$tmp/converted.zst") bytes; JSON report identical: $same"
      rm -f "$tmp/converted.zst" "$tmp"/*.json
    fi
    rm -f "$tmp/$mode.zst"
  done
done
