#!/bin/sh
# Regenerates the seed corpora of fuzz/corpus/ (committed; run by hand after a
# format change): builds fuzz_make_seeds in BUILD (default build-fuzz, as
# scripts/fuzz.sh configures it) and compiles the ELF seeds.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
corpus=fuzz/corpus
cmake --build "$build" --target fuzz_make_seeds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small="-shared -fPIC -nostdlib -Wl,--build-id -Wl,-z,noseparate-code -Wl,-z,max-page-size=4096 -Wl,--hash-style=gnu"
# shellcheck disable=SC2086
cc -O2 -g $small -o "$tmp/eh_frame.so" fuzz/seed_elf.c
# shellcheck disable=SC2086
cc -O2 -g -fno-asynchronous-unwind-tables -fno-unwind-tables $small -o "$tmp/debug_frame.so" fuzz/seed_elf.c
strip -o "$tmp/stripped.so" "$tmp/eh_frame.so"
for fuzzer in elf_symbolizer_fuzzer cfi_rules_fuzzer; do
  mkdir -p "$corpus/$fuzzer"
  cp "$tmp/eh_frame.so" "$tmp/debug_frame.so" "$tmp/stripped.so" "$corpus/$fuzzer/"
done
"$build/fuzz/fuzz_make_seeds" "$tmp/seeds" "$tmp/eh_frame.so"
for kind in artifact msgpack module_artifacts suppressions; do
  mkdir -p "$corpus/${kind}_fuzzer"
  cp "$tmp/seeds/$kind"/* "$corpus/${kind}_fuzzer/"
done
du -sh "$corpus"
