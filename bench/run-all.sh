#!/usr/bin/env bash
# Runs every benchmark and the torture matrix (`make bench`), then gathers their tables into
# bench/results/ALL.md (or ALL-quick.md). Each script also runs alone; see bench/README.md.
#   usage: bench/run-all.sh [--quick]       env: as each script (BENCH_RUNS, CLOUDSYNC_BIN, BENCH_SHM, ...)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
quick=""; suffix=""
[ "${1:-}" = "--quick" ] && { quick=--quick; suffix=-quick; }
results=${BENCH_RESULTS:-$here/results}; mkdir -p "$results"
failed=()
start=$(date +%s)
for s in throughput resume api-economy scale torture budget soak instant-start encryption; do
    echo "== bench/$s.sh $quick" >&2
    t0=$(date +%s)
    if ! BENCH_RESULTS=$results "$here/$s.sh" $quick >/dev/null; then failed+=("$s"); fi
    echo "   $s: $(( $(date +%s) - t0 )) s" >&2
done
{
    echo "# cloudsync benchmarks ($(date -u '+%F %H:%M UTC'), total $(( $(date +%s) - start )) s)"; echo
    for s in throughput resume api-economy scale torture budget soak instant-start encryption; do
        [ -f "$results/$s$suffix.md" ] && { sed 's/^# /## /; s/^## \([^#]\)/### \1/' "$results/$s$suffix.md"; echo; }
    done
} >"$results/ALL$suffix.md"
echo "Tables: $results/ALL$suffix.md" >&2
if [ ${#failed[@]} -gt 0 ]; then echo "bench: failed: ${failed[*]}" >&2; exit 1; fi
