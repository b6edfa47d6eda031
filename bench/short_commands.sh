#!/bin/sh
# Wall and CPU time of recording short commands, where the recorder's start
# and end dominate: /bin/true, python3 -c 1 and a shell running 20 short
# processes, recorded as record does by default (the fast path, with call
# paths), with --no-stacks and with --uprobes, untraced as the floor, and with
# BEFORE=DIR the default of the memtrack executable in DIR (another build; its
# libmemtrack-interpose.so next to it).
# Runs are interleaved; medians of ROUNDS runs; CPU is that of everything the
# run started. Also prints the getppid() cost record measured (syscall_ns) and
# the load average at the start and the end.
# Usage: [BEFORE=DIR] bench/short_commands.sh [BUILD_DIR] [ROUNDS]
set -eu
. "$(dirname "$0")/common.sh"
rounds=${2:-7}
modes="untraced default nostacks uprobes${before:+ before}"
shell20='for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; /bin/echo >/dev/null; done'

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$rounds"); do
  for w in true python sh20; do
    case $w in
      true) set -- /bin/true ;;
      python) set -- /usr/bin/python3 -c 1 ;;
      sh20) set -- /bin/sh -c "$shell20" ;;
    esac
    timed "$w untraced" "$tmp/$w.untraced" "$@"
    timed "$w default" "$tmp/$w.default" "$memtrack" record -q -o "$tmp/a.zst" -- "$@"
    info_counter bpf_verified_insns >>"$tmp/verified"
    timed "$w nostacks" "$tmp/$w.nostacks" "$memtrack" record -q --no-stacks -o "$tmp/a.zst" -- "$@"
    timed "$w uprobes" "$tmp/$w.uprobes" "$memtrack" record -q --uprobes -o "$tmp/a.zst" -- "$@"
    info_counter syscall_ns >>"$tmp/syscall"
    [ -z "$before" ] || timed "$w before" "$tmp/$w.before" "$before" record -q $before_fast -o "$tmp/a.zst" -- "$@"
  done
done
echo "medians of $rounds interleaved runs; getppid() syscall_ns (record's measure) $(median <"$tmp/syscall");"
echo "instructions the verifier walked, with call paths: $(median <"$tmp/verified")"
for w in true python sh20; do
  for mode in $modes; do
    wall=$(awk '{print $1}' "$tmp/$w.$mode" | median); cpu=$(awk '{print $2}' "$tmp/$w.$mode" | median)
    printf "  %-7s %-9s wall %5.2f s  CPU %5.2f s\n" "$w" "$mode" "$wall" "$cpu"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
