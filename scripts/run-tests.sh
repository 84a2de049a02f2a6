#!/usr/bin/env bash
# Runs every test target in its own `swift test` process, one after another, and prints one summary line.
# Why not one `swift test`: Swift Testing runs all suites in parallel, and on a 2-core machine the
# cooperative thread pool has 2 threads; long synchronous tests (pulls run as child processes) would then
# starve the asynchronous provider tests of threads until their fakes time out.
set -uo pipefail
cd "$(dirname "$0")/.."
targets=$(sed -n 's/.*testTarget(name: "\([^"]*\)".*/\1/p' Package.swift)
failed=()
flaky=()
passed=0
# run_target TARGET: runs it, sets $status and $n (tests run).
run_target() {
    local log; log=$(mktemp)
    swift test --skip-build --filter "^$1\\." 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    n=$(grep -Eo 'Test run with [0-9]+ tests?' "$log" | grep -Eo '[0-9]+' | tail -1)
    rm -f "$log"
}
for target in $targets; do
    echo "=== $target"
    run_target "$target"
    if [ "$status" -ne 0 ] || [ -z "$n" ]; then
        # A target that fails twice fails the run; one that passes on the rerun is reported as flaky below.
        echo "=== $target failed; running it once more"
        run_target "$target"
        if [ "$status" -ne 0 ] || [ -z "$n" ]; then failed+=("$target"); continue; fi
        flaky+=("$target")
    fi
    passed=$((passed + n))
done
echo
[ ${#flaky[@]} -eq 0 ] || echo "FLAKY (failed once, passed on the rerun; see the first run's output above): ${flaky[*]}"
echo "test targets: ${#failed[@]} failed${failed:+ (${failed[*]})}"
echo "$passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
