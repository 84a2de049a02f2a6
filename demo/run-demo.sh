#!/usr/bin/env bash
# The bundled demo: serves a generated library with a real WebDAV server (rclone serve webdav, Basic
# auth, 127.0.0.1 only), writes a config for it, then runs `cloudsync pull` and `cloudsync ls` (also by tag).
# Everything lives in demo/run/; nothing outside it is touched.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
run="$here/run"
bin="${CLOUDSYNC_BIN:-$top/.build/release/cloudsync}"
[ -x "$bin" ] || { echo "demo: $bin is missing; run 'make demo' (it builds first)" >&2; exit 1; }
mkdir -p "$run"
python3 "$here/make-library.py" "$run/library"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rclone serve webdav "$run/library" --addr "127.0.0.1:$port" --user demo --pass demo-pass \
    --config /dev/null --log-file "$run/rclone.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
    curl -s -o /dev/null -u demo:demo-pass "http://127.0.0.1:$port/" && break
    sleep 0.1
done

cat > "$run/config.toml" <<TOML
# Written by demo/run-demo.sh
[cache]
dir = "$run/cache"

[remote.demo]
provider = "webdav"
url = "http://127.0.0.1:$port/"
user = "demo"
password = "env:CLOUDSYNC_DEMO_PASSWORD"
TOML
export CLOUDSYNC_DEMO_PASSWORD=demo-pass
export CLOUDSYNC_CONFIG="$run/config.toml"

echo "== cloudsync pull --remote demo"
"$bin" pull --remote demo
echo
echo "== cloudsync ls --remote demo"
"$bin" ls --remote demo
echo
echo "== cloudsync ls --offline --artist чайковский --sort artist   (tags read from the start sets, no network)"
"$bin" ls --offline --remote demo --artist чайковский --sort artist
echo
echo "Tracks are in: $("$bin" cache path)/tracks/demo"
echo "Config used:   $run/config.toml (try: CLOUDSYNC_CONFIG=$run/config.toml $bin --help)"
