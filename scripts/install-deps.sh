#!/usr/bin/env bash
# Installs the Debian packages cloudsync needs to build, test, run the demo and the benchmarks.
# As root it runs apt-get; otherwise it prints the one command to run.
set -euo pipefail
packages=(libcurl4-openssl-dev libsqlite3-dev libssl-dev libxml2-dev pkg-config python3
          rclone nginx libnginx-mod-http-dav-ext apache2 apache2-utils curl aria2 time ffmpeg mpd mpc
          mpv vlc-bin vlc-plugin-base groff-base zsh fish openssl exfatprogs exfat-fuse)
# mpv, vlc-bin, vlc-plugin-base: the desktop players of DesktopPlayerTests
# openssl: the TLS tests' certificates, the cipher's speed in bench/encryption.sh; exfatprogs, exfat-fuse: a cache
# on exFAT (PortableNamesTests, which also need root and /dev/fuse)
[ "${1:-}" = "--bench" ] && packages+=(hyperfine)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
    echo "cloudsync needs these Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "Installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The distribution starts these services on install; the tests run their own private instances.
for s in nginx apache2 mpd; do
    if command -v systemctl >/dev/null 2>&1; then systemctl stop "$s" >/dev/null 2>&1 || true; fi
    service "$s" stop >/dev/null 2>&1 || true
done
if ! command -v swift >/dev/null 2>&1; then
    echo "Swift 6 toolchain not found on PATH: install it from swift.org (Debian 12) and retry." >&2
    exit 1
fi
