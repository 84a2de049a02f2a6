#!/usr/bin/env bash
# Resume waste: start a pull, kill -9 it at a random point, rerun it to completion, and count the bytes the
# rerun fetched beyond the bytes that were missing at the kill. "Missing at the kill" = library size minus the
# bytes the tool had on disk when it died (allocated bytes of its data files, so holes in sparse partial files
# count as missing); "fetched by the rerun" = GET bytes in nginx's access log. The same kill points go to
# cloudsync (WebDAV on nginx dav-ext), rclone copy (:webdav: on the same nginx) and aria2c -c (plain HTTP).
# Goal for cloudsync: waste <= cache.checkpoint (8 MiB) per file in flight at the kill.
#   usage: bench/resume.sh [--quick]     env: BENCH_KILLS (default 20, --quick 3), BENCH_SEED
source "$(dirname "$0")/lib.sh"
need rclone aria2c nginx
KILLS=${BENCH_KILLS:-$([ $QUICK = 1 ] && echo 3 || echo 20)}
SEED=${BENCH_SEED:-42}
if [ $QUICK = 1 ]; then count=8 size=$((4 << 20)); else count=40 size=$((16 << 20)); fi
checkpoint=$((8 << 20))
out=$RESULTS/resume$([ $QUICK = 1 ] && echo -quick || true).md
lib=$WORK/lib; make_lib "$lib" "$count" "$size"
expect=$(tree_sum "$lib")
start_nginx "$lib"
obscured=$(rclone obscure demo-pass)
webdav_config "$WORK/cs.toml" "$WORK/cache" "http://127.0.0.1:$NGINX_PORT/dav/"
python3 - "$lib" "$NGINX_PORT" >"$WORK/aria2.txt" <<'PY'
import os, sys
from urllib.parse import quote
for d, _, fs in os.walk(sys.argv[1]):
    for n in sorted(fs):
        rel = os.path.relpath(os.path.join(d, n), sys.argv[1])
        print(f"http://127.0.0.1:{sys.argv[2]}/lib/{quote(rel)}\n  out={rel}")
PY

# run_tool TOOL: starts TOOL in the background, prints its pid (the tool's own process, so kill -9 hits it).
run_tool() {
    case $1 in
    cloudsync) CLOUDSYNC_CONFIG=$WORK/cs.toml exec "$BIN" pull --quiet ;;
    rclone) exec rclone copy :webdav: "$WORK/dst" --config /dev/null --transfers 4 -q \
                --webdav-url "http://127.0.0.1:$NGINX_PORT/dav/" --webdav-user demo --webdav-pass "$obscured" ;;
    aria2c) exec aria2c -c -j4 -i "$WORK/aria2.txt" -d "$WORK/dst" --file-allocation=none --console-log-level=error \
                --summary-interval=0 --download-result=hide --auto-file-renaming=false --allow-overwrite=false -q ;;
    esac
}
data_dir() { [ "$1" = cloudsync ] && echo "$WORK/cache" || echo "$WORK/dst"; }
final_dir() { [ "$1" = cloudsync ] && echo "$WORK/cache/tracks/bench" || echo "$WORK/dst"; }
# present DIR: "<bytes on disk> <files partly present>" over data files (not the index, not aria2 control files).
present() {
    python3 - "$1" "$size" <<'PY'
import os, sys
total = inflight = 0; size = int(sys.argv[2])
for d, _, fs in os.walk(sys.argv[1]):
    for n in fs:
        if n.endswith((".aria2", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".lock")) or "/locks" in d: continue
        st = os.stat(os.path.join(d, n)); have = min(st.st_blocks * 512, st.st_size, size)
        if st.st_size == 0 and n.endswith(".lock"): continue
        total += have; inflight += 0 < have < size or (have == size and not n.endswith((".mp3", ".flac")))
print(total, inflight)
PY
}
served() { awk '$1=="GET"{s+=$3} END{print s+0}' "$NGINX_LOG"; }

res=$WORK/resume.txt; : >"$res"
tools=(cloudsync rclone aria2c)
declare -A full
for tool in "${tools[@]}"; do   # one uninterrupted run each, to place the kill points inside the transfer
    rm -rf "$WORK/dst" "$WORK/cache"; mkdir -p "$WORK/dst"
    t0=$(date +%s.%N); ( run_tool "$tool" ) >/dev/null 2>&1 || die "$tool failed an uninterrupted run"
    full[$tool]=$(python3 -c "import time; print(time.time() - $t0)")
    [ "$(tree_sum "$(final_dir "$tool")")" = "$expect" ] || die "$tool: wrong files after an uninterrupted run"
done
log "resume: uninterrupted ${full[*]} s; $KILLS kills per tool"
mapfile -t points < <(python3 -c "import random; r=random.Random($SEED); [print(f'{r.uniform(0.1, 0.9):.3f}') for _ in range($KILLS)]")
for i in $(seq 0 $((KILLS - 1))); do
    for tool in "${tools[@]}"; do
        rm -rf "$WORK/dst" "$WORK/cache"; mkdir -p "$WORK/dst"; : >"$NGINX_LOG"
        delay=$(python3 -c "print(${points[$i]} * ${full[$tool]})")
        ( run_tool "$tool" ) >/dev/null 2>&1 &
        pid=$!
        sleep "$delay"; kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
        read -r have inflight <<<"$(present "$(data_dir "$tool")")"
        sent1=$(served); : >"$NGINX_LOG"
        rc=0; ( run_tool "$tool" ) >/dev/null 2>&1 || rc=$?
        sent2=$(served)
        ok=no; [ "$(tree_sum "$(final_dir "$tool")")" = "$expect" ] && ok=yes
        echo "$tool ${points[$i]} $have $inflight $sent1 $sent2 $rc $ok" >>"$res"
    done
done
python3 - "$res" "$((count * size))" "$checkpoint" "$count" "$size" "$KILLS" "$(machine_line)" >"$out" <<'PY'
import statistics, sys
res, total, ckpt, count, size, kills, machine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:7], sys.argv[7]
M = 1 << 20
rows = {}
for l in open(res):
    t, p, have, infl, s1, s2, rc, ok = l.split()
    missing = total - int(have); waste = int(s2) - missing
    rows.setdefault(t, []).append((float(p), int(have), int(infl), int(s1), int(s2), int(rc), ok, waste))
print(f"# Resume waste\n\n{machine}\nLibrary: {count} x {int(size)//M} MiB on nginx; {kills} kill -9 per tool at the same random fractions of each tool's uninterrupted time; cloudsync checkpoint 8 MiB, jobs 4.\n")
print("| tool | waste median MiB | waste max MiB | waste mean MiB | files in flight (median) | within 1 checkpoint/in-flight file | rerun exit 0 | files correct |")
print("|---|---|---|---|---|---|---|---|")
for t, rs in rows.items():
    w = [r[7] / M for r in rs]
    within = sum(1 for r in rs if r[7] <= ckpt * max(r[2], 1))
    print(f"| {t} | {statistics.median(w):.1f} | {max(w):.1f} | {statistics.mean(w):.1f} | {statistics.median(r[2] for r in rs)} | {within}/{len(rs)} | {sum(r[5] == 0 for r in rs)}/{len(rs)} | {sum(r[6] == 'yes' for r in rs)}/{len(rs)} |")
print("\nPer kill (fraction of the run; MiB on disk at the kill; MiB served before the kill; MiB served by the rerun; waste):\n")
print("| tool | kill at | on disk | in flight | served before | served by rerun | waste |")
print("|---|---|---|---|---|---|---|")
for t, rs in rows.items():
    for r in rs:
        print(f"| {t} | {r[0]:.2f} | {r[1]/M:.1f} | {r[2]} | {r[3]/M:.1f} | {r[4]/M:.1f} | {r[7]/M:.1f} |")
bad = [t for t, rs in rows.items() if any(r[6] != "yes" for r in rs)]
sys.exit(1 if bad else 0)
PY
rc=$?
cat "$out"
exit $rc
