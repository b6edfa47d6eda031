#!/bin/bash
# Records the same programs on other kernels and compares every figure with
# this machine's recording of them: Debian 12's own kernels (6.1, the default
# linux-image-amd64, and the newest 6.12+deb12) by default.
#
# Each kernel package is downloaded (apt-get download, never installed) and
# booted under qemu (TCG: no KVM needed) with an initramfs holding busybox,
# the memtrack build and the recorded programs at the same absolute paths as
# here, with every library they load. The guest records each case, writes
# `memtrack report --format json` of it, and sends those back through a second
# serial port; kernel-matrix-compare.py compares them with the host's.
#
# Usage: scripts/kernel-matrix.sh [BUILD_DIR [KERNEL_PACKAGE...]]
#   BUILD_DIR   a build with tests (default: build)
# Env: KERNEL_CACHE (downloaded kernels, default BUILD_DIR/kernels),
#      APPEND_EXTRA (kernel command line, e.g. lockdown=integrity),
#      TIMEOUT (seconds per boot, default 900), KEEP (1: keep the work dir).
# Exit status: 0 when every case matched on every kernel, 1 otherwise, 2 when
# something needed is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=$(pwd)
BUILD=$(readlink -f "${1:-build}")
shift || true
KERNEL_CACHE=${KERNEL_CACHE:-$BUILD/kernels}
TIMEOUT=${TIMEOUT:-900}

for tool in qemu-system-x86_64 cpio gzip dpkg-deb apt-get python3; do
  command -v "$tool" >/dev/null || { echo "kernel-matrix: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
BUSYBOX=/bin/busybox
if ! file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked'; then
  echo "kernel-matrix: needs a static busybox at $BUSYBOX (busybox-static)" >&2
  exit 2
fi
MEMTRACK=$BUILD/src/cli/memtrack
FIXTURES=$BUILD/tests/fixtures
for f in "$MEMTRACK" "$BUILD/src/cli/libmemtrack-interpose.so" "$BUILD/demo/memtrack_demo" \
         "$FIXTURES/fx_libc" "$FIXTURES/fx_libc_static" "$FIXTURES/fx_callpaths"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "kernel-matrix: $f is not built (cmake --build $BUILD)" >&2; exit 2; }
done

# Debian 12's kernels: the one linux-image-amd64 installs, and the newest 6.12.
kernels=("$@")
if [ ${#kernels[@]} -eq 0 ]; then
  default=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  newest612=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | awk '{print $1}' |
              sort -V | tail -n 1)
  [ -n "$default" ] && [ -n "$newest612" ] || {
    echo "kernel-matrix: apt knows no Debian 12 kernel packages (apt-get update?)" >&2; exit 2; }
  kernels=("$default" "$newest612")
fi

WORK=$(mktemp -d /tmp/memtrack-kernel-matrix.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$KERNEL_CACHE"

# The cases: a name and a command line, run identically here and in each
# guest (busybox sh; $MT is memtrack, $FX the fixtures, $OUT the artifacts).
cat > "$WORK/cases" <<'EOF'
demo            $MT record -q --no-stacks -o $OUT/demo.zst -- $DEMO
demo-uprobes    $MT record -q --no-stacks --uprobes -o $OUT/demo-uprobes.zst -- $DEMO
demo-stacks     $MT record -q -o $OUT/demo-stacks.zst -- $DEMO
stacks-uprobes  $MT record -q --uprobes -o $OUT/stacks-uprobes.zst -- $DEMO
stacks-deep     $MT record -q --uprobes -o $OUT/stacks-deep.zst -- $FX/fx_callpaths depth 45 295
tree            $MT record -q -o $OUT/tree.zst -- $FX/fx_libc forkexec $FX/fx_libc
tree-uprobes    $MT record -q --uprobes -o $OUT/tree-uprobes.zst -- $FX/fx_libc forkexec $FX/fx_libc
static          $MT record -q -o $OUT/static.zst -- $FX/fx_libc_static count 1000
tcache-uprobes  $MT record -q --uprobes --no-stacks -o $OUT/tcache-uprobes.zst -- $FX/fx_libc tcachethreads 1
no-memory       $MT record -q --no-memory-records -o $OUT/no-memory.zst -- $DEMO
true            $MT record -q -o $OUT/true.zst -- /bin/true
pid             sh $SCRIPTS/kernel-matrix-pid.sh $MT $FX/fx_libc $OUT/pid.zst
EOF

# Runs every case and writes each report as $OUT/<case>.json, its record's
# stderr and exit status as <case>.log; `report` reads the same files here
# and in the guest.
cat > "$WORK/run-cases.sh" <<EOF
MT=$MEMTRACK FX=$FIXTURES DEMO=$BUILD/demo/memtrack_demo SCRIPTS=$SOURCE/scripts
EOF
cat >> "$WORK/run-cases.sh" <<'EOF'
OUT=$1
export MT FX DEMO SCRIPTS OUT
while read -r name command; do
  [ -n "$name" ] || continue
  start=$(cut -d' ' -f1 /proc/uptime)
  sh -c "$command" > "$OUT/$name.log" 2>&1 < /dev/null
  echo "record exit $?" >> "$OUT/$name.log"
  end=$(cut -d' ' -f1 /proc/uptime)
  echo "seconds $start $end" >> "$OUT/$name.log"
  if [ -f "$OUT/$name.zst" ]; then
    $MT report --format json -o "$OUT/$name.json" "$OUT/$name.zst" >> "$OUT/$name.log" 2>&1
    echo "report exit $?" >> "$OUT/$name.log"
    rm -f "$OUT/$name.zst"
  fi
done < "$(dirname "$0")/cases"
EOF

echo "kernel-matrix: host $(uname -r)"
mkdir -p "$WORK/host"
cp "$WORK/cases" "$WORK/run-cases.sh" "$WORK/host/"
# The host's figures: with the host's own mechanisms (6.13+: uprobe sessions).
(cd /tmp && sh "$WORK/host/run-cases.sh" "$WORK/host")

# --- the initramfs (shared by every kernel) ---------------------------------
R=$WORK/root
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib64,proc,sys,dev,tmp,run,etc,out}
cp "$BUSYBOX" "$R/bin/busybox"
for applet in $("$BUSYBOX" --list-full); do
  [ -e "$R/$applet" ] || ln -s /bin/busybox "$R/$applet"
done
copy() {  # a file at its own path, and every library it loads
  local f dir
  for f in "$1" $(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+' | sort -u); do
    [ -e "$R$f" ] && continue
    dir=$(dirname "$f")
    mkdir -p "$R$dir"
    cp -L "$f" "$R$f"
  done
}
copy "$MEMTRACK"
strip --strip-debug "$R$MEMTRACK"  # its debug info is most of the initramfs
copy "$BUILD/src/cli/libmemtrack-interpose.so"
copy "$BUILD/demo/memtrack_demo"
copy "$FIXTURES/fx_libc"
copy "$FIXTURES/fx_libc_static"
copy "$FIXTURES/fx_callpaths"
rm -f "$R/bin/true"
copy /bin/true
mkdir -p "$R$SOURCE/scripts"
cp scripts/kernel-matrix-pid.sh "$R$SOURCE/scripts/"
cp "$WORK/cases" "$WORK/run-cases.sh" "$R/"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\n' > "$R/etc/group"
cat > "$R/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# /tmp stays the initramfs's own (writable): a checkout under /tmp is copied
# there, at its path, and a tmpfs mounted over it would hide it.
mkdir -p /tmp
mount -t tmpfs tmpfs /out
mkdir -p /sys/fs/bpf /dev/shm
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
mount -t tmpfs tmpfs /dev/shm
echo "kernel-matrix: guest $(uname -r) up; lockdown: $(cat /sys/kernel/security/lockdown 2>/dev/null)"
cd /tmp
sh /run-cases.sh /out
# The results, as base64 text on the second serial port.
stty -F /dev/ttyS1 raw -echo 2>/dev/null
( cd /out && tar c . | gzip -1 | base64 ) > /dev/ttyS1
echo "kernel-matrix: guest done"
sync
poweroff -f
EOF
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.gz"
echo "kernel-matrix: initramfs $(du -h "$WORK/initrd.gz" | cut -f1)"

status=0
for package in "${kernels[@]}"; do
  deb=$(ls -t "$KERNEL_CACHE/${package}"_*.deb 2>/dev/null | head -n 1 || true)
  if [ -z "$deb" ]; then
    (cd "$KERNEL_CACHE" && apt-get download "$package" >/dev/null)
    deb=$(ls -t "$KERNEL_CACHE/${package}"_*.deb | head -n 1)
  fi
  x=$KERNEL_CACHE/x-$(basename "$deb" .deb)
  [ -d "$x/boot" ] || { mkdir -p "$x"; dpkg-deb -x "$deb" "$x"; }
  vmlinuz=$(ls "$x"/boot/vmlinuz-* | head -n 1)
  guest=$WORK/guest-$package
  mkdir -p "$guest"
  echo "kernel-matrix: booting $package"
  start=$(date +%s)
  set +e
  # One TCG thread for both vCPUs: with one thread each, a CPU running code
  # the other is patching (a static key, int3 first) took the int3 as an
  # oops (6.12's finish_task_switch, under qemu 7.2).
  timeout "$TIMEOUT" qemu-system-x86_64 -m 2G -smp 2 -cpu max -accel tcg,thread=single -kernel "$vmlinuz" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 rdinit=/init quiet loglevel=3 ${APPEND_EXTRA:-}" \
    -display none -monitor none -serial stdio -serial "file:$guest/serial1" -no-reboot \
    < /dev/null > "$guest/console.log" 2>&1
  qemu_status=$?
  set -e
  echo "kernel-matrix: $package: qemu exit $qemu_status after $(( $(date +%s) - start )) s"
  if ! base64 -di < "$guest/serial1" 2>/dev/null | tar xz -C "$guest" 2>/dev/null; then
    echo "kernel-matrix: $package: the guest sent no results; its console:" >&2
    tail -n 40 "$guest/console.log" >&2
    status=1
    continue
  fi
  python3 scripts/kernel-matrix-compare.py "$WORK/host" "$guest" "$package" || status=1
done
exit $status
