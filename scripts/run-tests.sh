#!/usr/bin/env bash
# Runs every test target in its own `swift test` process, one after another, and prints one summary line.
# Why not one `swift test`: Swift Testing runs all suites in parallel, and on a 2-core machine the
# cooperative thread pool has 2 threads; long synchronous tests (pulls run as child processes) would then
# starve the asynchronous provider tests of threads until their fakes time out.
set -uo pipefail
cd "$(dirname "$0")/.."
targets=$(sed -n 's/.*testTarget(name: "\([^"]*\)".*/\1/p' Package.swift)
failed=()
passed=0
for target in $targets; do
    echo "=== $target"
    log=$(mktemp)
    swift test --skip-build --filter "^$target\\." 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    n=$(grep -Eo 'Test run with [0-9]+ tests?' "$log" | grep -Eo '[0-9]+' | tail -1)
    rm -f "$log"
    if [ "$status" -ne 0 ] || [ -z "$n" ]; then failed+=("$target"); else passed=$((passed + n)); fi
done
echo
echo "test targets: ${#failed[@]} failed${failed:+ (${failed[*]})}"
echo "$passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
