#!/usr/bin/env bash
# The one generator of real audio fixtures, used by the tests (TestSupport's AudioFixtures) and by the benches
# (bench/instant-start.sh): SECONDS of a 440 Hz tone over pink noise (stereo, so codecs spend real bitrates), made
# by ffmpeg into DIR, every file tagged with non-ASCII values (the values below; AudioFixtures.swift holds the same
# ones for the tests to compare with), plus a few files derived by rearranging a real file's bytes.
#   usage: make-audio-fixtures.sh DIR [SECONDS]          (SECONDS: default 40; needs ffmpeg and python3)
# The ten files of issue #17: mp3-cover.mp3 (2 MB ID3v2 cover), mp3-id3v1.mp3 (ID3v1 only, no Xing),
# flac-cover.flac (2 MB PICTURE), m4a-end.m4a (moov at the end), m4a-faststart.m4a, m4a-cover.m4a (2 MB covr),
# vorbis.ogg, opus.opus, opus-cover.opus (2 MB picture in OpusTags), wav.wav. Also: mp3-vbr.mp3, aac-adts.aac
# (ID3v2 + APEv2), flac-id3.flac (an ID3v2 tag before fLaC), ogg-flac.oga, wav-list-after-data.wav, wav-rf64.wav,
# aiff.aiff.
set -euo pipefail
dir=${1:?usage: make-audio-fixtures.sh DIR [SECONDS]}
seconds=${2:-40}
for t in ffmpeg python3; do command -v "$t" >/dev/null || { echo "make-audio-fixtures: $t is missing: apt-get install ffmpeg python3 (scripts/install-deps.sh does)" >&2; exit 1; }; done
mkdir -p "$dir"
cd "$dir"

title="Café — Пётр 東京 🎵"
artist="Mötley Crüe & Björk"
album_artist="Various Ärtists"
album="Ünïcode Album ½"
meta=(-metadata "title=$title" -metadata "artist=$artist" -metadata "album_artist=$album_artist"
      -metadata "album=$album" -metadata "track=9/12" -metadata "disc=1/2" -metadata "date=2019" -metadata "genre=Jazz")
ff() { ffmpeg -v error -y -nostdin "$@"; }

graph="sine=frequency=440:duration=$seconds:sample_rate=44100[a];"
graph+="anoisesrc=duration=$seconds:color=pink:sample_rate=44100:amplitude=0.02:seed=1[b];"
graph+="anoisesrc=duration=$seconds:color=pink:sample_rate=44100:amplitude=0.02:seed=2[c];"
graph+="[b][c]amerge=inputs=2[n];[a]pan=stereo|c0=c0|c1=c0[s];[s][n]amix=inputs=2[out0]"
ff -f lavfi -i "$graph" -c:a pcm_s16le source.wav

# A cover that does not compress: 1448² seeded random grey pixels as PNG (~2.1 MB); and an ffmetadata file with
# every tag and a METADATA_BLOCK_PICTURE comment (a base64 FLAC picture block of the cover), which ffmpeg 5.1
# writes into OpusTags as is, across as many pages as it takes.
python3 - <<'PY'
import random
random.seed(0xC0FE)
open("cover.gray", "wb").write(random.randbytes(1448 * 1448))
PY
ff -f rawvideo -pix_fmt gray -s 1448x1448 -i cover.gray -frames:v 1 cover.png
python3 - "$title" "$artist" "$album_artist" "$album" <<'PY'
import base64, struct, sys
title, artist, album_artist, album = sys.argv[1:5]
png = open("cover.png", "rb").read()
mime = b"image/png"
block = struct.pack(">II", 3, len(mime)) + mime + struct.pack(">IIIIII", 0, 1448, 1448, 8, 0, len(png)) + png
def esc(s):
    return "".join("\\" + c if c in "=;#\\\n" else c for c in s)
fields = [("title", title), ("artist", artist), ("album_artist", album_artist), ("album", album),
          ("track", "9/12"), ("disc", "1/2"), ("date", "2019"), ("genre", "Jazz")]
with open("picture.txt", "w", encoding="utf-8") as f:
    f.write(";FFMETADATA1\n")
    for k, v in fields:
        f.write(f"{k}={esc(v)}\n")
    f.write("METADATA_BLOCK_PICTURE=" + esc(base64.b64encode(block).decode()) + "\n")
PY

src=(-i source.wav)
cover=(-i source.wav -i cover.png -map 0:a -map 1:v -c:v copy -disposition:v attached_pic)
# Encoders at their fastest settings, two at a time (the machine is shared); the first failure fails the run.
pids=()
run() { "$@" & pids+=($!); if [ ${#pids[@]} -ge 2 ]; then wait_all; fi; }
wait_all() { local p; for p in "${pids[@]}"; do wait "$p"; done; pids=(); }
run ff "${cover[@]}" -c:a libmp3lame -b:a 128k -compression_level 9 -id3v2_version 3 -write_id3v1 1 "${meta[@]}" mp3-cover.mp3
run ff "${src[@]}" -c:a libmp3lame -q:a 4 -compression_level 9 "${meta[@]}" mp3-vbr.mp3
run ff "${cover[@]}" -c:a flac -compression_level 0 "${meta[@]}" flac-cover.flac
run ff "${src[@]}" -c:a aac -b:a 128k -aac_coder fast "${meta[@]}" m4a-end.m4a
run ff "${src[@]}" -c:a libvorbis -q:a 4 "${meta[@]}" vorbis.ogg
run ff "${src[@]}" -c:a libopus -b:a 96k -compression_level 0 "${meta[@]}" opus.opus
run ff "${src[@]}" -i picture.txt -map 0:a -map_metadata 1 -c:a libopus -b:a 96k -compression_level 0 opus-cover.opus
run ff "${src[@]}" -c:a pcm_s16le "${meta[@]}" wav.wav
run ff "${src[@]}" -c:a pcm_s16le -rf64 always "${meta[@]}" wav-rf64.wav
run ff "${src[@]}" -c:a pcm_s16be -write_id3v2 1 "${meta[@]}" aiff.aiff
wait_all

# ID3v1 only, and no Xing frame (a stream copy drops it): ffmpeg's ID3v1 writer takes ID3v2 frame names.
run ff -i mp3-cover.mp3 -map 0:a -c copy -map_metadata -1 -id3v2_version 0 -write_id3v1 1 -write_xing 0 \
    -metadata "TIT2=$title" -metadata "TPE1=$artist" -metadata "TALB=$album" -metadata "TRCK=9/12" \
    -metadata "TDRC=2019" -metadata "TCON=Jazz" mp3-id3v1.mp3
run ff -i m4a-end.m4a -c copy -movflags +faststart m4a-faststart.m4a
run ff -i flac-cover.flac -map 0:a -c copy -f ogg ogg-flac.oga
run ff -i m4a-end.m4a -i cover.png -map 0:a -map 1:v -c copy -disposition:v attached_pic m4a-cover.m4a
run ff -i m4a-end.m4a -map 0:a -c copy -f adts -write_id3v2 1 -write_apetag 1 aac-adts.aac
wait_all

# wav-list-after-data.wav: ffmpeg's WAV (fmt, LIST, data) rewritten as fmt, data, LIST — the INFO tags after the
# audio, where other writers put them and where readers (ffmpeg included) still look. flac-id3.flac: the ID3v2 tag
# of a real MP3 (its syncsafe size tells its length) before a FLAC file.
python3 - <<'PY'
import struct
b = open("wav.wav", "rb").read()
chunks, i = {}, 12
while i + 8 <= len(b):
    size = struct.unpack_from("<I", b, i + 4)[0]
    end = min(len(b), i + 8 + size + size % 2)
    chunks.setdefault(b[i:i + 4], b[i:end])
    i = end
if not all(k in chunks for k in (b"fmt ", b"LIST", b"data")):
    raise SystemExit("make-audio-fixtures: unexpected WAV layout")
body = b"WAVE" + chunks[b"fmt "] + chunks[b"data"] + chunks[b"LIST"]
open("wav-list-after-data.wav", "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
m = open("mp3-vbr.mp3", "rb").read()
if m[:3] != b"ID3":
    raise SystemExit("make-audio-fixtures: no ID3v2 in mp3-vbr.mp3")
size = 0
for k in range(4):
    size = size << 7 | m[6 + k]
open("flac-id3.flac", "wb").write(m[:10 + size] + open("flac-cover.flac", "rb").read())
PY
rm -f cover.gray picture.txt
