#!/bin/sh
# Attaching to a running service (issue 28): a python3 service building small
# dicts (bench/service.py) runs throughout, with PYTHONMALLOC=$SERVICE_MALLOC
# (malloc, the default here: every object is a malloc, ~9 allocator calls per
# dict; pymalloc: python's own default, arenas for small objects); each round
# measures, interleaved, its rate untraced, with `memtrack record --pid`
# attached (in-process; `nostacks`: with --no-stacks), with
# `memtrack record --uprobes --pid` and with
# `heaptrack -p` attached: dicts per wall second and per second of the
# service's own CPU (the VM's wall clock is noisy), over a WINDOW of seconds
# once attached; and each tool's attach (start until attached) and detach
# (SIGINT until it exited) wall times, with memtrack's own figures of the
# in-process attach (attach_in_process_us: stopping a thread, dlopen, GOT
# rewrite) and detach (detach_in_process_us: until every GOT entry is back).
# Medians and ratios to untraced. Usage:
# [SERVICE_MALLOC=malloc|pymalloc] bench/service_attach.sh [BUILD_DIR] [ROUNDS] [WINDOW]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-3}
window=${3:-3}
malloc=${SERVICE_MALLOC:-malloc}
# measure MODE: the service's rates over the window, appended to $tmp/rate.MODE, $tmp/cpurate.MODE.
measure() {
  b0=$(built); c0=$(cpu); t0=$(now)
  sleep "$window"
  b1=$(built); c1=$(cpu); t1=$(now)
  awk -v b="$((b1 - b0))" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.0f\n", b / (t1 - t0)}' >>"$tmp/rate.$1"
  awk -v b="$((b1 - b0))" -v c="$c0" -v d="$c1" 'BEGIN {printf "%.0f\n", b / (d - c)}' >>"$tmp/cpurate.$1"
}
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f\n", b - a}'; }

head -c 8 /dev/zero >"$tmp/counter"
PYTHONMALLOC=$malloc python3 "$here/service.py" "$tmp/counter" &
service=$!
trap 'kill $service 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1

for _ in $(seq "$rounds"); do
  measure untraced
  for mode in memtrack nostacks uprobes; do
    flag=""; [ "$mode" = nostacks ] && flag=--no-stacks; [ "$mode" = uprobes ] && flag=--uprobes
    start=$(now)
    "$memtrack" record $flag --pid "$service" -o "$tmp/a.zst" 2>"$tmp/log" &
    recorder=$!
    wait_for "$tmp/log" "Ctrl-C to stop"
    elapsed "$start" >>"$tmp/attach.$mode"
    measure "$mode"
    start=$(now)
    kill -INT "$recorder"
    wait "$recorder"
    elapsed "$start" >>"$tmp/detach.$mode"
    if [ "$mode" = memtrack ]; then
      info_counter attach_in_process_us >>"$tmp/inproc_attach"
      info_counter detach_in_process_us >>"$tmp/inproc_detach"
      [ "$(info_counter attach_in_process)" = 1 ] || { echo "not attached in-process:"; cat "$tmp/log"; exit 1; }
    fi
  done
  start=$(now)
  # In a process group of its own: its interpreter's pipeline outlives it.
  setsid heaptrack -o "$tmp/ht" -p "$service" >"$tmp/log" 2>&1 &
  tracker=$!
  wait_for "$tmp/log" "injection finished"
  elapsed "$start" >>"$tmp/attach.heaptrack"
  # heaptrack says "injection finished" whether gdb's calls worked or not.
  if grep -q 'No symbol "heaptrack_inject"' "$tmp/log"; then
    grep -E "Couldn't|No symbol" "$tmp/log" | head -2 >"$tmp/heaptrack_failed"
  fi
  measure heaptrack
  start=$(now)
  kill -TERM "$tracker"  # a script started in the background ignores SIGINT
  wait "$tracker" || true
  elapsed "$start" >>"$tmp/detach.heaptrack"
  kill -TERM "-$tracker" 2>/dev/null || true
  cat "$tmp"/ht* | wc -c >>"$tmp/heaptrack_bytes"
  rm -f "$tmp"/ht*
done

echo "python3 service (bench/service.py, PYTHONMALLOC=$malloc), medians of $rounds interleaved rounds, ${window} s windows"
r0=$(median <"$tmp/rate.untraced"); c0=$(median <"$tmp/cpurate.untraced")
for mode in untraced memtrack nostacks uprobes heaptrack; do
  r=$(median <"$tmp/rate.$mode"); c=$(median <"$tmp/cpurate.$mode")
  a="-"; d="-"
  [ -f "$tmp/attach.$mode" ] && a="$(median <"$tmp/attach.$mode") s" && d="$(median <"$tmp/detach.$mode") s"
  awk -v m="$mode" -v r="$r" -v c="$c" -v r0="$r0" -v c0="$c0" -v a="$a" -v d="$d" 'BEGIN {
    printf "  %-9s %9d dicts/s (%5.1f %%)  %9d per CPU-s (%5.1f %%)  attach %-8s detach %s\n", m, r, 100 * r / r0, c, 100 * c / c0, a, d }'
done
if [ -f "$tmp/heaptrack_failed" ]; then
  echo "  heaptrack -p did not attach (its figures are the service's own): $(tr '\n' ' ' <"$tmp/heaptrack_failed")"
fi
echo "  memtrack in-process: attach $(median <"$tmp/inproc_attach") us, detach $(median <"$tmp/inproc_detach") us;" \
  "heaptrack's output $(median <"$tmp/heaptrack_bytes") bytes per window"
