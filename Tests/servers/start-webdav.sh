#!/usr/bin/env bash
# Starts a real WebDAV server on 127.0.0.1 serving DIR under the path /dav/, with Basic auth
# user `demo`, password `demo-pass`, and returns once it answers.
#
#   usage: start-webdav.sh rclone|apache|nginx DIR [fresh]
#   fresh: rclone lists DIR afresh on every request (--dir-cache-time 0s), for tests that change DIR under a
#          running server; without it rclone keeps its default directory cache (a 20,000-file folder stays fast).
#   prints: PORT PID STATEDIR   (one line on stdout)
#
# The server runs in the background as the leader of its own session and process group. Stop it with
# `kill -TERM -- -PID` (the whole group: Apache/nginx workers too), then remove STATEDIR
# (configuration, logs, password file). Exit status 2: usage; 3: the server binary or module is
# missing; 4: it did not start within 15 s (its log is copied to stderr).
set -euo pipefail

server=${1:-}
dir=${2:-}
fresh=${3:-}
if [[ -z "$server" || -z "$dir" || ! -d "$dir" ]]; then
    echo "usage: $0 rclone|apache|nginx DIR (DIR must exist)" >&2
    exit 2
fi
dir=$(cd "$dir" && pwd)

need() {
    if ! command -v "$1" >/dev/null 2>&1 && [[ ! -x "$1" ]]; then
        echo "start-webdav.sh: '$1' is not installed (Debian package: $2); install it or run the Makefile's setup" >&2
        exit 3
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

state=$(mktemp -d /tmp/cloudsync-webdav-XXXXXX)
chmod 755 "$state"
port=$(free_port)
user=demo
pass=demo-pass

# Runs "$@" in the background in its own session, with stdin from /dev/null, output to the log, and no
# other inherited descriptor: a caller (Foundation's Process) may watch a descriptor it gave us to learn
# when this script exits, and a server holding a copy would make the script look alive forever.
detach() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if (( fd > 2 )); then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        exec setsid "$@"
    ) >>"$state/server.log" 2>&1 </dev/null &
    pid=$!
}

write_htpasswd() {
    # {SHA} lines are understood by both Apache and nginx.
    python3 - "$state/htpasswd" "$user" "$pass" <<'PY'
import base64, hashlib, sys
path, user, password = sys.argv[1:4]
digest = base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
with open(path, "w") as f:
    f.write(f"{user}:{{SHA}}{digest}\n")
PY
    chmod 644 "$state/htpasswd"
}

case "$server" in
rclone)
    need rclone rclone
    cache=()
    [[ "$fresh" == fresh ]] && cache=(--dir-cache-time 0s)
    RCLONE_CONFIG=/dev/null detach rclone serve webdav "$dir" \
        --addr "127.0.0.1:$port" --baseurl /dav --user "$user" --pass "$pass" "${cache[@]}"
    ;;
apache)
    need apache2 apache2
    modules=/usr/lib/apache2/modules
    for m in mpm_event authn_file authn_core authz_user authz_core auth_basic dav dav_fs alias dir mime; do
        if [[ ! -f "$modules/mod_$m.so" ]]; then
            echo "start-webdav.sh: Apache module mod_$m is missing from $modules (package apache2)" >&2
            exit 3
        fi
    done
    write_htpasswd
    mkdir -p "$state/lock" && chmod 777 "$state/lock"
    runas=""
    if [[ $(id -u) == 0 ]]; then
        # Apache refuses to serve as root; its children drop to nobody (DIR must be world-readable).
        runas="User nobody
Group $(id -gn nobody)"
    fi
    cat >"$state/httpd.conf" <<CONF
ServerRoot "$state"
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile "$state/httpd.pid"
ErrorLog "$state/server.log"
LogLevel warn
$runas
LoadModule mpm_event_module $modules/mod_mpm_event.so
LoadModule authn_file_module $modules/mod_authn_file.so
LoadModule authn_core_module $modules/mod_authn_core.so
LoadModule authz_user_module $modules/mod_authz_user.so
LoadModule authz_core_module $modules/mod_authz_core.so
LoadModule auth_basic_module $modules/mod_auth_basic.so
LoadModule dav_module $modules/mod_dav.so
LoadModule dav_fs_module $modules/mod_dav_fs.so
LoadModule alias_module $modules/mod_alias.so
LoadModule dir_module $modules/mod_dir.so
LoadModule mime_module $modules/mod_mime.so
TypesConfig /etc/mime.types
DavLockDB "$state/lock/DavLock"
StartServers 1
ServerLimit 2
ThreadsPerChild 16
MaxRequestWorkers 32
<Directory />
    Require all denied
</Directory>
Alias /dav "$dir"
<Directory "$dir">
    Dav On
    AuthType Basic
    AuthName "cloudsync test"
    AuthUserFile "$state/htpasswd"
    Require valid-user
    Options None
    AllowOverride None
</Directory>
CONF
    detach apache2 -f "$state/httpd.conf" -DFOREGROUND
    ;;
nginx)
    need nginx nginx
    module=/usr/lib/nginx/modules/ngx_http_dav_ext_module.so
    if [[ ! -f "$module" ]]; then
        echo "start-webdav.sh: $module is missing (package libnginx-mod-http-dav-ext)" >&2
        exit 3
    fi
    write_htpasswd
    mkdir -p "$state/tmp" && chmod 777 "$state/tmp"
    runas=""
    if [[ $(id -u) == 0 ]]; then
        runas="user nobody $(id -gn nobody);"
    fi
    cat >"$state/nginx.conf" <<CONF
load_module $module;
daemon off;
master_process on;
worker_processes 1;
$runas
pid $state/nginx.pid;
error_log $state/server.log warn;
events { worker_connections 64; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    client_body_temp_path $state/tmp/body;
    proxy_temp_path $state/tmp/proxy;
    fastcgi_temp_path $state/tmp/fastcgi;
    uwsgi_temp_path $state/tmp/uwsgi;
    scgi_temp_path $state/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        location /dav/ {
            alias $dir/;
            auth_basic "cloudsync test";
            auth_basic_user_file $state/htpasswd;
            dav_ext_methods PROPFIND OPTIONS;
        }
    }
}
CONF
    detach nginx -e "$state/server.log" -c "$state/nginx.conf" -p "$state"
    ;;
*)
    echo "usage: $0 rclone|apache|nginx DIR (unknown server '$server')" >&2
    exit 2
    ;;
esac

# Wait until it answers an authenticated PROPFIND (any HTTP status proves it listens).
for _ in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "start-webdav.sh: $server exited during start-up; its log:" >&2
        cat "$state/server.log" >&2 || true
        exit 4
    fi
    if python3 - "$port" <<'PY' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5)
s.close()
PY
    then
        echo "$port $pid $state"
        exit 0
    fi
    sleep 0.1
done
echo "start-webdav.sh: $server did not listen on 127.0.0.1:$port within 15 s; its log:" >&2
cat "$state/server.log" >&2 || true
kill "$pid" 2>/dev/null || true
exit 4
