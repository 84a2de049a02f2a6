#!/usr/bin/env bash
# Shared helpers for the benchmark scripts: a scratch area on tmpfs, library generation, private nginx and
# rclone servers on 127.0.0.1, cloudsync configs, and measurement with /usr/bin/time -v.
# Sourced, never run. Every server started here is stopped by the EXIT trap of the sourcing script.
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$BENCH/.." && pwd)
BIN=${CLOUDSYNC_BIN:-$TOP/.build/release/cloudsync}
QUICK=0
RUNS=${BENCH_RUNS:-5}
for arg in "$@"; do
    case "$arg" in
    --quick) QUICK=1; RUNS=${BENCH_RUNS:-1} ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 0 ;;
    esac
done
# Files live on tmpfs so disk speed does not dominate.
SHM=${BENCH_SHM:-/dev/shm}
WORK=$(mktemp -d "$SHM/cloudsync-bench.XXXXXX")
# Tokens that a run stores (refreshes) stay inside the run, never in the user's own state directory.
export XDG_STATE_HOME="$WORK/state"
RESULTS=${BENCH_RESULTS:-$BENCH/results}
mkdir -p "$RESULTS"
_pids=()
_mounts=()
_disk_paths=()  # disk images and folders made by disk_dir, removed at exit
# stop_pid PID: SIGTERM, then SIGKILL after 1 s (a parent such as a test runner may leave SIGTERM blocked).
stop_pid() {
    local _
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 1 10); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
# stop_servers: stops every server started so far.
stop_servers() { local p; for p in "${_pids[@]:-}"; do [ -n "$p" ] && stop_pid "$p"; done; _pids=(); }
cleanup() {
    local m
    stop_servers
    for m in "${_mounts[@]:-}"; do [ -n "$m" ] && umount "$m" 2>/dev/null || true; done
    for m in "${_disk_paths[@]:-}"; do [ -n "$m" ] && rm -rf "$m"; done
    [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
need() { for t in "$@"; do command -v "$t" >/dev/null 2>&1 || die "'$t' is missing: run scripts/install-deps.sh --bench"; done; }
need python3 curl /usr/bin/time
[ -x "$BIN" ] || die "$BIN is missing: run 'swift build -c release --static-swift-stdlib --product cloudsync' (or set CLOUDSYNC_BIN)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# make_lib DIR COUNT SIZE_BYTES [PER_ALBUM]: COUNT random tracks in Artist NNN/Album NN/Track NNNN.mp3,
# PER_ALBUM tracks per album (default 10), 10 albums per artist. A single track goes to Big/One/track.flac.
make_lib() {
    python3 - "$@" <<'PY'
import os, sys
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = int(sys.argv[4]) if len(sys.argv) > 4 else 10
os.makedirs(root, exist_ok=True)
block = os.urandom(1 << 20)
for i in range(count):
    if count == 1:
        path = os.path.join(root, "Big", "One", "track.flac")
    else:
        album = i // per
        path = os.path.join(root, f"Artist {album // 10:03d}", f"Album {album % 10:02d}", f"Track {i:06d}.mp3")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        # Distinct content per file: a fresh 16-byte prefix then a rotation of a random block.
        left = size
        f.write(os.urandom(min(16, left))); left -= min(16, left)
        off = (i * 4099) % len(block)
        while left > 0:
            chunk = block[off:off + left] or block[:left]
            f.write(chunk); left -= len(chunk); off = 0
PY
}

# make_mp3_lib DIR COUNT SIZE_BYTES [PER_ALBUM]: COUNT real MP3s of exactly SIZE_BYTES in make_lib's layout: an
# ID3v2.4 tag (title, artist, album, track, year, genre; distinct per file, padded to the size), then CBR 256 kbit/s
# frames of ffmpeg's pink noise cut at a frame boundary. What a pull analyses in a music library: make_lib's random
# bytes have no tags, and the analyser searches their first 64 KiB for a frame in vain.
make_mp3_lib() {
    command -v ffmpeg >/dev/null 2>&1 || die "'ffmpeg' is missing: run scripts/install-deps.sh"
    local base=$WORK/noise-$3.mp3
    ffmpeg -v error -y -f lavfi -i "anoisesrc=d=$(( $3 / 32000 + 1 )):c=pink:a=0.3:seed=1" -ac 2 -ar 44100 -b:a 256k \
        -write_xing 0 -id3v2_version 0 "$base"
    python3 - "$@" "$base" <<'PY'
import os, sys
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = int(sys.argv[4]) if len(sys.argv) > 5 else 10
noise = open(sys.argv[-1], "rb").read()
def syncsafe(n): return bytes([(n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F])
def frame(fid, text):
    data = b"\x03" + text.encode()
    return fid.encode() + syncsafe(len(data)) + b"\x00\x00" + data
# Frame boundaries of the MPEG-1 Layer III stream (ffmpeg writes no tag with -id3v2_version 0).
bounds, i = [0], 0
while i + 4 <= len(noise) and noise[i] == 0xFF:
    rate = [44100, 48000, 32000][(noise[i + 2] >> 2) & 3]
    kbps = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320][noise[i + 2] >> 4]
    i += 144000 * kbps // rate + ((noise[i + 2] >> 1) & 1)
    bounds.append(i)
for n in range(count):
    album = n // per
    path = os.path.join(root, f"Artist {album // 10:03d}", f"Album {album % 10:02d}", f"Track {n:06d}.mp3")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    body = (frame("TIT2", f"Track {n} of album {album}") + frame("TPE1", f"Artist {album // 10:03d}")
            + frame("TALB", f"Album {album % 10:02d}") + frame("TRCK", f"{n % per + 1}/{per}")
            + frame("TDRC", "2019") + frame("TCON", "Electronic"))
    audio = max(b for b in bounds if b <= size - 10 - len(body))
    assert audio > 0, "SIZE_BYTES is too small for a tag and a frame"
    padding = size - 10 - len(body) - audio
    with open(path, "wb") as f:
        f.write(b"ID3\x04\x00\x00" + syncsafe(len(body) + padding) + body + bytes(padding) + noise[:audio])
PY
}

# tree_sum DIR: "<files> <bytes> <sha256 of sorted per-file sha256 list>" — compares two trees' content.
tree_sum() {
    python3 - "$1" <<'PY'
import hashlib, os, sys
root = sys.argv[1]; rows = []; total = 0
for d, _, files in os.walk(root):
    for n in files:
        p = os.path.join(d, n); h = hashlib.sha256()
        with open(p, "rb") as f:
            while b := f.read(1 << 20): h.update(b)
        rows.append(os.path.relpath(p, root) + " " + h.hexdigest()); total += os.path.getsize(p)
rows.sort()
print(len(rows), total, hashlib.sha256("\n".join(rows).encode()).hexdigest())
PY
}

# start_nginx DIR: one nginx serving DIR at /lib/ (plain HTTP, autoindex) and at /dav/ (WebDAV with dav-ext,
# Basic auth demo/demo-pass). Sets NGINX_PORT, NGINX_LOG (access log: method status bytes "range" "uri").
# With NGINX_LIMIT_RATE set (e.g. 50m), every response is sent at most that fast (nginx limit_rate, bytes/s
# per request, so per connection): a server that caps each connection's speed.
start_nginx() {
    need nginx
    local dir=$1 state=$WORK/nginx.$RANDOM module=/usr/lib/nginx/modules/ngx_http_dav_ext_module.so
    local limit=""; [ -n "${NGINX_LIMIT_RATE:-}" ] && limit="limit_rate ${NGINX_LIMIT_RATE};"
    [ -f "$module" ] || die "$module is missing (package libnginx-mod-http-dav-ext)"
    mkdir -p "$state/tmp"; chmod 777 "$state/tmp" "$state"
    python3 -c 'import base64,hashlib;print("demo:{SHA}"+base64.b64encode(hashlib.sha1(b"demo-pass").digest()).decode())' >"$state/htpasswd"
    NGINX_PORT=$(free_port); NGINX_LOG=$state/access.log
    local runas=""; [ "$(id -u)" = 0 ] && runas="user root;"
    cat >"$state/nginx.conf" <<CONF
load_module $module;
daemon off;
worker_processes 1;
$runas
pid $state/nginx.pid;
error_log $state/error.log warn;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    log_format bench '\$request_method \$status \$body_bytes_sent "\$http_range" "\$uri"';
    access_log $NGINX_LOG bench;
    sendfile on; tcp_nopush on; keepalive_requests 100000;
    $limit
    client_body_temp_path $state/tmp/body;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location /lib/ { alias $dir/; autoindex on; }
        location /dav/ {
            alias $dir/;
            auth_basic "bench"; auth_basic_user_file $state/htpasswd;
            dav_ext_methods PROPFIND OPTIONS;
        }
    }
}
CONF
    nginx -e "$state/error.log" -c "$state/nginx.conf" -p "$state" </dev/null >/dev/null 2>&1 &
    _pids+=($!)
    wait_port "$NGINX_PORT" || { cat "$state/error.log" >&2; die "nginx did not start"; }
}

# start_rclone_webdav DIR: rclone serve webdav of DIR at / with Basic auth demo/demo-pass. Sets RCLONE_PORT.
start_rclone_webdav() {
    need rclone
    RCLONE_PORT=$(free_port)
    RCLONE_CONFIG=/dev/null rclone serve webdav "$1" --addr "127.0.0.1:$RCLONE_PORT" --user demo --pass demo-pass \
        --log-file "$WORK/rclone-serve.$RCLONE_PORT.log" </dev/null >/dev/null 2>&1 &
    _pids+=($!)
    wait_port "$RCLONE_PORT" || die "rclone serve webdav did not start"
}

wait_port() {
    local _
    for _ in $(seq 1 100); do
        python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.3).close()' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# webdav_config FILE CACHE_DIR URL [extra TOML lines for [pull]/[cache]...]: a config with remote "bench".
webdav_config() {
    local file=$1 cache=$2 url=$3; shift 3
    { echo "[cache]"; echo "dir = \"$cache\""; echo 'max_size = "100GiB"'
      for line in "$@"; do echo "$line"; done
      echo; echo "[remote.bench]"; echo 'provider = "webdav"'; echo "url = \"$url\""
      echo 'user = "demo"'; echo 'password = "demo-pass"'; } >"$file"
}

# measure OUT LABEL CMD...: runs CMD under /usr/bin/time -v and appends "LABEL wall user sys maxrss_kib rc machine_cpu"
# to OUT. machine_cpu is the CPU seconds of the whole machine during the run (/proc/stat, all but idle and iowait):
# it counts what process CPU misses, the kernel's writeback threads and the server, so a tool whose bytes reach
# the disk through its own fdatasync (charged to it) and one ending with `sync -f` (writeback mostly charged to
# the kernel's flusher threads) compare fairly; other processes' load counts too.
measure() {
    local out=$1 label=$2; shift 2
    local tv=$WORK/time.$$.txt rc=0 busy0 busy1
    busy0=$(machine_ticks)
    /usr/bin/time -v -o "$tv" "$@" >"$WORK/last.out" 2>"$WORK/last.err" || rc=$?
    busy1=$(machine_ticks)
    python3 - "$tv" "$label" "$rc" "$((busy1 - busy0))" "$(getconf CLK_TCK)" >>"$out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def f(k):
    m = re.search(re.escape(k) + r":\s*(\S+)", text); return m.group(1) if m else "0"
w = f("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(w)))
print(sys.argv[2], f"{wall:.3f}", f("User time (seconds)"), f("System time (seconds)"), f("Maximum resident set size (kbytes)"), sys.argv[3],
      f"{int(sys.argv[4]) / int(sys.argv[5]):.2f}")
PY
    if [ "$rc" != 0 ]; then echo "bench: '$label' exited $rc; stderr:" >&2; tail -5 "$WORK/last.err" >&2; fi
    return 0
}

# machine_ticks: the machine's busy CPU time so far in clock ticks (user, nice, system, irq, softirq of all CPUs).
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# summarize OUT GIB: markdown table per label: median wall (min–max), CPU s/GiB (median), the machine's CPU s/GiB
# during the runs (median), peak RSS (max), runs, failures.
summarize() {
    python3 - "$1" "$2" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 7: rows.setdefault(p[0], []).append(p)
gib = float(sys.argv[2])
print("| tool | wall median (min–max) s | CPU s/GiB | machine CPU s/GiB | peak RSS MiB | runs | failed |")
print("|---|---|---|---|---|---|---|")
for label, rs in rows.items():
    walls = [float(r[1]) for r in rs]; cpu = [(float(r[2]) + float(r[3])) / gib for r in rs]
    machine = [float(r[6]) / gib for r in rs]
    rss = max(int(r[4]) for r in rs) / 1024; bad = sum(1 for r in rs if r[5] != "0")
    print(f"| {label} | {statistics.median(walls):.2f} ({min(walls):.2f}–{max(walls):.2f}) | {statistics.median(cpu):.2f} | "
          f"{statistics.median(machine):.2f} | {rss:.1f} | {len(rs)} | {bad} |")
PY
}

# median_of OUT LABEL FIELD(1=wall): the median of a field for a label.
median_of() {
    python3 - "$@" <<'PY'
import statistics, sys
vals = [float(l.split()[int(sys.argv[3])]) for l in open(sys.argv[1]) if l.split()[0] == sys.argv[2]]
print(f"{statistics.median(vals):.4f}" if vals else "nan")
PY
}

# disk_dir: sets DISK_DIR to a fresh folder on a disk filesystem for a destination, and DISK_NOTE to a sentence
# saying what it is (call it as it is, not in $(...): the mount is undone by this shell's cleanup). As root
# (unless BENCH_DISK_IMAGE=0) it is the root of a fresh ext4 made with mkfs.ext4's defaults, journal included,
# in an 8 GiB sparse image under BENCH_DISK (default /var/tmp), loop-mounted for this run and
# removed at exit: a user's disk. Why not BENCH_DISK itself: this machine's root is ext4 without a journal, where
# ext4 checks every new inode against those deleted in the last 60-300 s (recently_deleted(), skipped when there
# is a journal), so a run that creates 2,000 files after another tool's 2,000 were deleted spent 20-40 % of its CPU
# there, by chance of which block groups the inodes fell in (curl and cloudsync alike). Otherwise (not root, no
# mkfs.ext4, or the mount fails) a folder under BENCH_DISK. Both go at exit.
disk_dir() {
    local parent=${BENCH_DISK:-/var/tmp} image mnt
    if [ "$(id -u)" = 0 ] && [ "${BENCH_DISK_IMAGE:-1}" = 1 ] && command -v mkfs.ext4 >/dev/null 2>&1; then
        image=$(mktemp "$parent/cloudsync-bench-fs.XXXXXX.img"); mnt=$WORK/disk
        mkdir -p "$mnt"
        if truncate -s 8G "$image" && mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$image" \
                && mount -o loop "$image" "$mnt"; then
            _mounts+=("$mnt"); _disk_paths+=("$image")
            DISK_NOTE="a fresh ext4 with a journal (mkfs.ext4 defaults), an 8 GiB image on $parent ($(fstype "$parent")), loop-mounted"
            DISK_DIR=$mnt; return 0
        fi
        rm -f "$image"
    fi
    DISK_NOTE="a folder on $parent ($(fstype "$parent")$(fs_journal "$parent"))"
    DISK_DIR=$(mktemp -d "$parent/cloudsync-bench-disk.XXXXXX"); _disk_paths+=("$DISK_DIR")
}
# fs_journal DIR: ", no journal" when DIR is on ext3/ext4 without one (the kernel lists each journal it runs in
# /proc/fs/jbd2/DEVICE-*), else nothing.
fs_journal() {
    case "$(fstype "$1")" in ext3|ext4) ;; *) return 0 ;; esac
    local dev; dev=$(findmnt -no SOURCE -T "$1" 2>/dev/null) || return 0
    compgen -G "/proc/fs/jbd2/${dev##*/}-*" >/dev/null || echo ", no journal"
    return 0
}
# fstype DIR: the filesystem DIR is on, as mount names it (ext4, tmpfs; `stat -f` says ext2/ext3 for ext4).
fstype() { { findmnt -no FSTYPE -T "$1" 2>/dev/null || stat -f -c %T "$1"; } | head -1; }
machine_line() { echo "Machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg); cloudsync $("$BIN" --version 2>/dev/null | head -1)"; }

# start_fifo NAME CMD...: starts CMD, a server that prints its port(s) on its first stdout line and exits when its
# stdin closes (a fifo this shell holds open until it exits); sets LINE to that first line.
start_fifo() {
    local name=$1; shift
    local fifo=$WORK/$name.in _fd _
    rm -f "$fifo"; mkfifo "$fifo"
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" <"$fifo" &
    _pids+=($!)
    exec {_fd}>"$fifo"
    for _ in $(seq 1 300); do [ -s "$WORK/$name.out" ] && break; sleep 0.05; done
    LINE=$(head -1 "$WORK/$name.out"); [ -n "$LINE" ] || { cat "$WORK/$name.err" >&2; die "$name did not start"; }
}

# start_files_fake ROOT [ARGS...]: Tests/Fakes/files_fake.py serving ROOT under /dav/ (Basic auth demo/demo-pass,
# request log at /_log). Sets FAKE_PORT.
start_files_fake() {
    local root=$1; shift
    start_fifo "fake.$RANDOM" python3 "$TOP/Tests/Fakes/files_fake.py" --root "$root" "$@"
    FAKE_PORT=$LINE
}

# start_serve CONFIG: `cloudsync serve --port 0` on CONFIG (the process itself, so the EXIT trap stops it).
# Sets SERVE_PORT and SERVE_PID.
start_serve() {
    local out=$WORK/serve.$RANDOM.out _
    "$BIN" --config "$1" ${SERVE_LOG_FLAGS:--q} serve --port 0 >"$out" 2>"$out.err" &
    SERVE_PID=$!
    _pids+=("$SERVE_PID")
    for _ in $(seq 1 100); do grep -q listening "$out" 2>/dev/null && break; sleep 0.05; done
    SERVE_PORT=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$out")
    [ -n "$SERVE_PORT" ] || { cat "$out.err" >&2; die "serve did not start"; }
}

# median: the median of the numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
