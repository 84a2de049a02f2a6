#!/usr/bin/env python3
"""Writes a small sample music library: short sine-wave WAV files in nested folders, some with
spaces and non-ASCII names. Tracks under Artist/Album/ carry RIFF INFO tags (title, artist, album, track),
so `cloudsync ls` shows "Artist – Title"; the loose ones have none and show their file names.
Usage: make-library.py DIR [--count N]. Deterministic: same files each run."""
import math, os, struct, sys, wave

TRACKS = [
    "Ludwig van Beethoven/Symphony No. 5/01 - Allegro con brio.wav",
    "Ludwig van Beethoven/Symphony No. 5/02 - Andante con moto.wav",
    "Чайковский/Лебединое озеро/01 - Сцена.wav",
    "Чайковский/Лебединое озеро/02 - Вальс.wav",
    "坂本龍一/戦場のメリークリスマス.wav",
    "Sigur Rós/( )/Untitled #1.wav",
    "Björk/Homogenic/Jóga.wav",
    "Various Artists/Best of 2020 [Live]/Track 1 & 2.wav",
    "Various Artists/Best of 2020 [Live]/50% Off + More.wav",
    "Loose Tracks/café del mar.wav",
    "Loose Tracks/🎵 emoji song.wav",
    "Loose Tracks/It's \"Quoted\".wav",
]

def write_track(path, index, seconds=1.0, rate=22050):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    freq = 220.0 * (2 ** (index / 12.0))
    frames = bytearray()
    for n in range(int(seconds * rate)):
        frames += struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * n / rate)))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))

def info_chunk(tags):
    """A LIST/INFO chunk of (id, UTF-8 text) pairs, each NUL-terminated and padded to an even size."""
    body = b"INFO"
    for key, text in tags:
        value = text.encode("utf-8") + b"\0"
        body += key.encode("ascii") + struct.pack("<I", len(value)) + value + (b"\0" if len(value) % 2 else b"")
    return b"LIST" + struct.pack("<I", len(body)) + body

def tag_track(path, rel):
    """Appends INFO tags taken from Artist/Album/NN - Title.wav to the file and fixes the RIFF size."""
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] == "Loose Tracks":
        return
    artist, album, leaf = parts[0], parts[1], os.path.splitext(parts[2])[0]
    number, _, title = leaf.partition(" - ")
    tags = [("INAM", title if title else leaf), ("IART", artist), ("IPRD", album)]
    if title and number.isdigit():
        tags.append(("ITRK", str(int(number))))
    with open(path, "r+b") as f:
        data = f.read() + info_chunk(tags)
        f.seek(0)
        f.write(data[:4] + struct.pack("<I", len(data) - 8) + data[8:])

def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make-library.py DIR")
    root = sys.argv[1]
    for i, rel in enumerate(TRACKS):
        target = os.path.join(root, rel)
        if not os.path.exists(target):
            write_track(target, i, seconds=1.0 + (i % 4) * 0.5)
            tag_track(target, rel)
    # A non-audio file that must not be pulled.
    notes = os.path.join(root, "Loose Tracks", "notes.txt")
    with open(notes, "w") as f:
        f.write("not music\n")
    print(f"{len(TRACKS)} tracks in {root}")

if __name__ == "__main__":
    main()
