#!/bin/sh
# Builds memtrack's code (src/) with AddressSanitizer and
# UndefinedBehaviorSanitizer (gcc, as the plain build: the tests' fixtures
# are compiled as there, their code layout is what the tests check; the
# tests themselves too, linked with the sanitizers' runtime, so that a ccache
# shared with the plain build serves them: .ci/run) into build-asan/ and runs
# the unit tests on it. The BPF integration tests are
# left out: they check the recorder against the kernel, which the plain
# build's run (scripts/test.sh) already does.
# Usage: scripts/test-sanitizers.sh [build|test]: one step only (.ci/run
# builds beside the plain tests); both by default.
set -eu
cd "$(dirname "$0")/.."
step=${1:-all}
build=build-asan
if [ "$step" != test ]; then
  scripts/install-deps.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMEMTRACK_SANITIZE=ON -DMEMTRACK_TESTS=ON -DMEMTRACK_INTEGRATION_TESTS=OFF -DMEMTRACK_BENCHMARKS=OFF
  cmake --build "$build" -j"$(nproc)"
fi
[ "$step" != build ] || exit 0
# Any report fails the test; leaks too (LeakSanitizer).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# These compare unwinding with glibc's backtrace() and find malloc in libc:
# ASan intercepts both, so they test ASan's runtime there, not memtrack.
intercepted='^(stack_walk_test\.InterposerStackWalk\.|unwind_test\.ModuleCfi\.LibcMallocEntry|unwind_test\.CfiWalk\.|stack_unwinder_test\.CapturedStacks\.(AlternatingFramePointer|DeepRecursion|SignalHandler|CodeWithoutCfi|ModulesFromModuleRecords))'
ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 600 -E "$intercepted"
