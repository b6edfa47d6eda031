#!/bin/sh
# The layering of src/ (docs/ARCHITECTURE.md, "Layering"): each folder may
# include its own headers and those of the folders listed for it, never a
# folder above it. Run by ctest (layering_test); prints every violation.
set -eu
src=${1:-$(dirname "$0")/../src}

allowed() {
  case $1 in
    wire)      echo "" ;;
    util|io)   echo "" ;;
    interpose) echo "wire" ;;
    format)    echo "io util" ;;
    module)    echo "format io util" ;;
    unwind)    echo "wire module format io util" ;;
    symbolize) echo "module format io util" ;;
    record)    echo "wire unwind module format io util" ;;
    analyze)   echo "symbolize unwind module format io util" ;;
    export)    echo "analyze module format io util" ;;
    output)    echo "analyze symbolize format io util" ;;
    cli)       echo "output export analyze record symbolize unwind module format io util" ;;
    *)         echo "?" ;;
  esac
}

status=0
for dir in "$src"/*/; do
  folder=$(basename "$dir")
  ok=$(allowed "$folder")
  if [ "$ok" = "?" ]; then
    echo "src/$folder: not in the layering (scripts/check-layering.sh, docs/ARCHITECTURE.md)"
    status=1
    continue
  fi
  for used in $(grep -rhoE '#include "[a-z_]+/' "$dir" | sed -E 's/#include "([a-z_]+)\//\1/' | sort -u); do
    [ "$used" = "$folder" ] && continue
    case " $ok " in
      *" $used "*) ;;
      *)
        grep -rnE "#include \"$used/" "$dir" | sed "s|^$src/|src/|;s|\$|: src/$folder may not include src/$used|"
        status=1 ;;
    esac
  done
done
exit $status
