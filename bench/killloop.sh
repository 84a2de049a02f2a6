#!/usr/bin/env bash
# The long kill -9 loop (not run in CI): the engine test KillTests with 200 seeded random kills of
# `cloudsync pull` against files_fake.py (6 files of ~3 MiB, 1 MiB/s per connection, checkpoint 256 KiB).
# After each kill the bytes lost must stay within two checkpoints (one while checkpoints keep up) plus 64 KiB in
# flight per file in flight; whenever a run completes the library is compared byte for byte and the cache is
# started over; a final rerun must fetch exactly the bytes the index said were missing.
#
#   usage: bench/killloop.sh [ITERATIONS] [SEED]      (defaults: 200, random; the seed is printed)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
iterations=${1:-200}
seed=${2:-$(( (RANDOM << 15 | RANDOM) % 1000000 + 1 ))}
command -v python3 >/dev/null || { echo "killloop: python3 is missing (Debian package python3)" >&2; exit 3; }
cd "$top"
swift build --build-tests
echo "killloop: $iterations iterations, seed $seed"
start=$(date +%s)
CLOUDSYNC_KILL_ITERATIONS=$iterations CLOUDSYNC_KILL_SEED=$seed \
    swift test --skip-build --filter 'CloudSyncEngineTests.KillTests'
echo "killloop: passed in $(( $(date +%s) - start )) s (seed $seed)"
