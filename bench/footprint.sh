#!/bin/sh
# memtrack's own peak RSS (the maximum resident set size bench/timed_run.py
# reports: the recorder's VmHWM, or its target's if larger) for a tiny program, an
# allocation-heavy one and a tiny one with --stacks; the recorder's alone
# (the trailer's recorder_max_rss_kib) on python3 (PYTHONMALLOC=malloc,
# bench/work.py) with call paths; and the kernel memory of
# its BPF maps (the memlock of each map descriptor of the recorder, while it
# records `sleep`). Usage: bench/footprint.sh [BUILD_DIR] [ROUNDS] [RECORD OPTIONS...]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
shift 2 2>/dev/null || shift $#

peak() {  # label, then the record command's arguments
  label=$1; shift
  for _ in $(seq "$rounds"); do
    /usr/bin/python3 "$here/timed_run.py" "$tmp/time" "$memtrack" record -q "$@" >/dev/null
    awk '{print $4}' "$tmp/time" >>"$tmp/$label"
  done
  echo "$label: $(median <"$tmp/$label") KiB peak RSS (median of $rounds)"
}
peak tiny "$@" --no-stacks -o "$tmp/a.zst" -- true
peak allocation-heavy "$@" --no-stacks --encode-workers 1 -o "$tmp/a.zst" -- "$loop" 100000
peak tiny-stacks "$@" --stacks -o "$tmp/a.zst" -- true
for _ in $(seq "$rounds"); do
  PYTHONMALLOC=malloc "$memtrack" record -q "$@" -o "$tmp/a.zst" -- python3 "$here/work.py" >/dev/null
  info_counter recorder_max_rss_kib >>"$tmp/python3"
done
echo "python3 with call paths: recorder $(median <"$tmp/python3") KiB peak RSS (median of $rounds: $(sort -n "$tmp/python3" | tr '\n' ' '))"

for stacks in --no-stacks --stacks; do
  "$memtrack" record -q $stacks "$@" -o "$tmp/a.zst" -- sleep 2 &
  sleep 1.5
  # The recorder's own map descriptors: their fdinfo gives each map's kernel
  # memory. $! is memtrack's main process (the guardian, which holds the map
  # of tracked processes only); the recorder is one of its children.
  for info in $(for p in $! $(cat /proc/$!/task/*/children 2>/dev/null); do echo /proc/$p/fdinfo/*; done); do
    grep -q '^map_id:' "$info" 2>/dev/null || continue
    awk '/^map_type:|^max_entries:|^memlock:|^map_id:/ {v[$1] = $2} END {
      printf "  map %-6s type %-3s max_entries %-9s %9.1f KiB\n", v["map_id:"], v["map_type:"], v["max_entries:"], v["memlock:"] / 1024 }' "$info"
  done | sort -u -k2,2n >"$tmp/maps"
  wait
  cat "$tmp/maps"
  awk -v what="$stacks" '{ kib += $(NF - 1) } END { printf "kernel memory of the maps %s: %.1f MiB\n", what, kib / 1024 }' "$tmp/maps"
done
