#!/bin/sh
# The layering of src/ and bpf/ (docs/ARCHITECTURE.md, "Layering"): each
# folder may include its own headers and those of the folders listed for it,
# never a folder above it. Every quoted include is checked:
#   "folder/name.h"  folder must be the includer's own or one listed for it;
#   "name.h"         a bare name must be a file of the includer's own folder
#                    (or a header the build generates there, see generated);
#   "../name.h"      never: a relative path hides which folder it reaches.
# Run by ctest (layering_test) on the tree, and by layering_violations_test
# on a tree with planted violations; prints every violation, exits 1 if any.
# Usage: check-layering.sh [SRC_DIR]   (bpf/ is SRC_DIR/../bpf)
set -eu
src=${1:-$(dirname "$0")/../src}
bpf=$src/../bpf

allowed() {
  case $1 in
    wire)      echo "" ;;
    util|io)   echo "" ;;
    interpose) echo "wire" ;;
    bpf)       echo "wire" ;;
    format)    echo "io util" ;;
    module)    echo "format io util" ;;
    unwind)    echo "wire module format io util" ;;
    symbolize) echo "wire module format io util" ;;
    record)    echo "wire unwind module format io util" ;;
    analyze)   echo "symbolize unwind module format io util" ;;
    export)    echo "analyze module format io util" ;;
    output)    echo "analyze symbolize format io util" ;;
    cli)       echo "output export analyze record symbolize unwind module format io util" ;;
    *)         echo "?" ;;
  esac
}

# Headers the build writes, included bare from a folder: the running kernel's
# types (bpf/CMakeLists.txt) and the BPF skeleton the recorder loads.
generated() {
  case $1 in
    wire|bpf) echo "vmlinux.h" ;;
    record)   echo "memtrack.skel.h" ;;
    *)        echo "" ;;
  esac
}

status=0
# check FOLDER DIR NAME: NAME is how violations name DIR (src/record, bpf).
check() {
  folder=$1 dir=$2 name=$3
  ok=$(allowed "$folder")
  if [ "$ok" = "?" ]; then
    echo "$name: not in the layering (scripts/check-layering.sh, docs/ARCHITECTURE.md)"
    status=1
    return
  fi
  made=$(generated "$folder")
  # FILE:LINE:INCLUDED for every quoted include of the folder's files.
  found=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir" |
          sed -E 's/^([^:]*):([0-9]+):[^"]*"([^"]*)".*/\1:\2:\3/') || true
  [ -n "$found" ] || return 0
  while IFS= read -r line; do
    file=${line%%:*}
    rest=${line#*:}
    number=${rest%%:*}
    included=${rest#*:}
    where="$name/${file#"$dir"/}:$number"
    case $included in
      ../*|*/../*|./*)
        echo "$where: \"$included\": a relative include (write \"folder/name.h\")"
        status=1 ;;
      */*)
        used=${included%%/*}
        [ "$used" = "$folder" ] && continue
        case " $ok " in
          *" $used "*) ;;
          *)
            echo "$where: \"$included\": $name may not include src/$used"
            status=1 ;;
        esac ;;
      *)
        [ -e "$(dirname "$file")/$included" ] && continue
        case " $made " in
          *" $included "*) continue ;;
        esac
        echo "$where: \"$included\": not a header of $name (a bare include names one of its own folder; write \"folder/$included\")"
        status=1 ;;
    esac
  done <<EOF
$found
EOF
}

for dir in "$src"/*/; do
  dir=${dir%/}
  folder=$(basename "$dir")
  check "$folder" "$dir" "src/$folder"
done
if [ -d "$bpf" ]; then
  check bpf "$bpf" bpf
fi
exit $status
