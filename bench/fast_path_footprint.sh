#!/bin/sh
# The recorder's own memory on the fast path (record's default) against the
# uprobe path (--uprobes), and the fast path of another build (BEFORE=DIR: DIR/src/cli/
# memtrack, or a directory holding memtrack and its libmemtrack-interpose.so),
# in one run, interleaved, medians of ROUNDS runs:
#  1. peak RSS (the largest process's maximum resident set size, memtrack's
#     recorder included: bench/timed_run.py) and minor page
#     faults of `record --encode-workers 1` of malloc_loop PAIRS/5 (400,000
#     calls by default), and the CPU time of the whole run;
#  2. per intercepted call: CPU ns per malloc+free pair of malloc_loop PAIRS
#     (the thread's CPU time);
#  3. python3 (PYTHONMALLOC=malloc, bench/work.py): wall, CPU and peak RSS.
# Prints the getppid() cost record measured and the load average.
# Usage: [BEFORE=DIR] bench/fast_path_footprint.sh [BUILD_DIR] [PAIRS] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
pairs=${2:-200000}
rounds=${3:-5}
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# measure LABEL COMMAND...: appends "peak_KiB minor_faults wall cpu" to $tmp/LABEL.
measure() {
  label=$1; shift
  /usr/bin/python3 "$here/timed_run.py" "$tmp/time" "$@" >/dev/null 2>"$tmp/stderr" </dev/null || {
    echo "$label failed:"; cat "$tmp/stderr"; }
  awk '{printf "%s %s %s %.3f\n", $4, $5, $1, $2 + $3}' "$tmp/time" >>"$tmp/$label"
}
col() { awk -v c="$2" '{print $c}' "$tmp/$1" | median; }

for _ in $(seq "$rounds"); do
  # 1. the recorder's footprint
  measure rss.uprobes "$memtrack" record -q --no-stacks --uprobes --encode-workers 1 -o "$tmp/a.zst" -- "$loop" $((pairs / 5))
  info_counter syscall_ns >>"$tmp/syscall"
  [ -z "$before" ] || measure rss.before "$before" record -q $before_fast --encode-workers 1 -o "$tmp/a.zst" -- "$loop" $((pairs / 5))
  measure rss.fast "$memtrack" record -q --no-stacks --encode-workers 1 -o "$tmp/a.zst" -- "$loop" $((pairs / 5))
  info_counter interposer_full_waits >>"$tmp/full_waits"
  # 2. per call
  "$loop" "$pairs" 0 cpu >>"$tmp/call.untraced"
  [ -z "$before" ] || "$before" record -q $before_fast -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/call.before"
  "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- "$loop" "$pairs" 0 cpu >>"$tmp/call.fast"
  # 3. python3
  measure py.untraced env PYTHONMALLOC=malloc /usr/bin/python3 "$here/work.py"
  [ -z "$before" ] || measure py.before "$before" record -q $before_fast -o "$tmp/a.zst" -- env PYTHONMALLOC=malloc /usr/bin/python3 "$here/work.py"
  measure py.fast "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- env PYTHONMALLOC=malloc /usr/bin/python3 "$here/work.py"
done

echo "medians of $rounds interleaved runs; load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "getppid() syscall_ns (record's measure): $(median <"$tmp/syscall")"
echo "1. record --encode-workers 1 -- malloc_loop $((pairs / 5)): peak RSS KiB, minor faults, wall s, CPU s"
for m in uprobes ${before:+before} fast; do
  printf "  %-8s %8s KiB %7s faults %6s s %6s s CPU\n" "$m" "$(col rss.$m 1)" "$(col rss.$m 2)" "$(col rss.$m 3)" "$(col rss.$m 4)"
done
echo "  interposer_full_waits (this build): $(tr '\n' ' ' <"$tmp/full_waits")"
echo "2. CPU ns per malloc+free pair, $pairs pairs"
u=$(median <"$tmp/call.untraced"); f=$(median <"$tmp/call.fast")
b=""; [ -z "$before" ] || b=$(median <"$tmp/call.before")
echo "  untraced $u, ${before:+before $b, }fast $f"
awk -v u="$u" -v f="$f" -v b="${b:-0}" -v hb="${before:+1}" 'BEGIN {
  if (hb) printf "  per call added: before %.1f ns, fast %.1f ns\n", (b-u)/2, (f-u)/2;
  else printf "  per call added: fast %.1f ns\n", (f-u)/2 }'
echo "3. python3 PYTHONMALLOC=malloc bench/work.py: wall s, CPU s, peak RSS KiB (memtrack's or python's, the larger)"
for m in untraced ${before:+before} fast; do
  printf "  %-8s %6s s %6s s CPU %8s KiB\n" "$m" "$(col py.$m 3)" "$(col py.$m 4)" "$(col py.$m 1)"
done
