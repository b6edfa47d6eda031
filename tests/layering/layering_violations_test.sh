#!/bin/sh
# scripts/check-layering.sh fails on each kind of violation: in a small tree
# that passes, plants one violation at a time and checks that the script
# names it and exits nonzero. Run by ctest (layering_violations_test).
# Usage: layering_violations_test.sh CHECK_LAYERING_SCRIPT
set -eu
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# A tree that passes: wire at the bottom, includes of the own folder (bare and
# "folder/"), of allowed folders, and of the headers the build generates.
mkdir -p "$tmp/src/wire" "$tmp/src/util" "$tmp/src/record" "$tmp/src/interpose" "$tmp/bpf"
printf '#include <vmlinux.h>\n' > "$tmp/src/wire/types.h"
printf '#include "types.h"\n#include "vmlinux.h"\n' > "$tmp/src/wire/events.h"
printf '#pragma once\n' > "$tmp/src/util/hex.h"
printf '#include "record/recorder.h"\n#include "util/hex.h"\n#include "wire/events.h"\n#include "memtrack.skel.h"\n' \
  > "$tmp/src/record/recorder.cpp"
printf '#pragma once\n#include "wire/events.h"\n' > "$tmp/src/record/recorder.h"
printf '#include "stack_walk.h"\n#include "wire/events.h"\n' > "$tmp/src/interpose/interpose.c"
printf '#pragma once\n' > "$tmp/src/interpose/stack_walk.h"
printf '#include "vmlinux.h"\n#include "state.bpf.h"\n#include "wire/events.h"\n' > "$tmp/bpf/memory.bpf.c"
printf '#pragma once\n' > "$tmp/bpf/state.bpf.h"

failures=0
if ! out=$(sh "$check" "$tmp/src" 2>&1); then
  echo "FAIL: the clean tree does not pass:"
  echo "$out"
  failures=1
fi

# plant FILE LINE EXPECTED: appends LINE to FILE, expects a nonzero exit and
# a report containing EXPECTED, then takes the line out again.
plant() {
  file=$tmp/$1 line=$2 expected=$3
  new_dir=
  [ -d "$(dirname "$file")" ] || { new_dir=$(dirname "$file"); mkdir -p "$new_dir"; }
  cp "$file" "$file.orig" 2>/dev/null || : > "$file.orig"
  printf '%s\n' "$line" >> "$file"
  if out=$(sh "$check" "$tmp/src" 2>&1); then
    echo "FAIL: $1 with '$line' passes the check"
    failures=$((failures + 1))
  elif ! printf '%s\n' "$out" | grep -qF -- "$expected"; then
    echo "FAIL: $1 with '$line': no report containing '$expected' in:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: $(printf '%s\n' "$out" | grep -F -- "$expected")"
  fi
  if [ -s "$file.orig" ]; then mv "$file.orig" "$file"; else rm -f "$file" "$file.orig"; fi
  [ -z "$new_dir" ] || rmdir "$new_dir"
}

# An upward folder include: util is below record.
plant src/util/hex.h '#include "record/recorder.h"' \
  'src/util/hex.h:2: "record/recorder.h": src/util may not include src/record'
# wire includes nothing of memtrack.
plant src/wire/events.h '#include "util/hex.h"' \
  'src/wire/events.h:3: "util/hex.h": src/wire may not include src/util'
# A bare include of another folder's header.
plant src/record/recorder.cpp '#include "events.h"' \
  'src/record/recorder.cpp:5: "events.h": not a header of src/record'
# A relative include, even of an allowed folder.
plant src/interpose/interpose.c '#include "../wire/events.h"' \
  'src/interpose/interpose.c:3: "../wire/events.h": a relative include'
# bpf/ includes wire/ and its own headers only.
plant bpf/memory.bpf.c '#include "record/recorder.h"' \
  'bpf/memory.bpf.c:4: "record/recorder.h": bpf may not include src/record'
plant bpf/memory.bpf.c '#include "../src/wire/events.h"' \
  'bpf/memory.bpf.c:4: "../src/wire/events.h": a relative include'
# A folder the layering does not place.
plant src/newfolder/new.h '#pragma once' 'src/newfolder: not in the layering'

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "every planted violation is reported"
