#!/bin/sh
# Installs every Debian package memtrack's build, tests and benchmarks need.
# Idempotent and non-interactive; run as root on Debian 12. chromium (the HTML
# report's browser test) costs ~2 min and ~830 MB of disk on a fresh machine;
# heaptrack-gui and xvfb (the heaptrack export's GUI test) ~21 MB to download.
set -eu
export DEBIAN_FRONTEND=noninteractive
packages="build-essential cmake clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
  libzstd-dev libmsgpack-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcapstone-dev
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev heaptrack valgrind sqlite3 python3 python3-jsonschema
  libiberty-dev protobuf-compiler libprotobuf-dev golang-go libabsl-dev
  clang-14 libclang-rt-14-dev chromium heaptrack-gui xvfb xauth ccache
  qemu-system-x86 busybox-static cpio file"
# One dpkg-query for all (every script of CI calls this: a repeat costs
# ~0.1 s, not a query per package).
# shellcheck disable=SC2086
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $packages 2>/dev/null |
  awk '$2 == "install" && $4 == "installed" {printf "%s ", $1}' || true)"
missing=""
for p in $packages; do
  case "$installed" in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
if [ -n "$missing" ]; then
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
fi
