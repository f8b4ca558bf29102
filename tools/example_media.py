#!/usr/bin/env python3
"""Draws the example mod's sprites and synthesises its sound (mods/example_spiral/sprites,
sounds). Everything here is made by this script: no outside art or audio. Needs only
Python 3 for the PNGs; the Ogg needs `oggenc` (Debian: vorbis-tools).

    python3 tools/example_media.py
"""
import math
import os
import shutil
import struct
import subprocess
import tempfile
import wave
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mods", "example_spiral")


def png(path, w, h, pixel):
    """Writes an RGBA8 PNG; pixel(x, y) returns (r, g, b, a) in 0..255."""
    rows = b"".join(
        b"\x00" + b"".join(struct.pack("4B", *[max(0, min(255, int(c))) for c in pixel(x, y)]) for x in range(w))
        for y in range(h)
    )

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def smooth(e0, e1, x):
    t = max(0.0, min(1.0, (x - e0) / (e1 - e0)))
    return t * t * (3 - 2 * t)


def petal(x, y):
    # A petal pointing right (sprites face +x; bullets turn them to where they fly).
    u = (x + 0.5) / 24 * 2 - 1
    v = (y + 0.5) / 12 * 2 - 1
    d = math.hypot(u, v / (0.55 + 0.45 * (1 - (u + 1) / 2)))
    a = 1 - smooth(0.82, 1.0, d)
    core = 1 - smooth(0.0, 0.6, math.hypot(u - 0.25, v))
    rim = smooth(0.6, 0.9, d)
    r = 255
    g = 120 + 120 * core - 60 * rim
    b = 217 + 38 * core - 80 * rim
    return (r, g, b, 255 * a)


def whirler(x, y):
    # A pink three-armed swirl with a dark outline and a pale eye.
    u = (x + 0.5) / 64 * 2 - 1
    v = (y + 0.5) / 64 * 2 - 1
    r = math.hypot(u, v)
    ang = math.atan2(v, u)
    arms = 0.5 + 0.5 * math.cos(3 * ang + r * 7)
    body = 1 - smooth(0.86, 0.94, r)
    outline = smooth(0.78, 0.86, r)
    base = (255 * (0.55 + 0.45 * arms), 70 + 90 * arms, 200 * (0.6 + 0.4 * arms))
    eye = 1 - smooth(0.16, 0.2, r)
    pupil = 1 - smooth(0.06, 0.09, math.hypot(u - 0.03, v + 0.03))
    c = [base[i] * (1 - outline) + 25 * outline for i in range(3)]
    c = [c[i] * (1 - eye) + 245 * eye for i in range(3)]
    c = [c[i] * (1 - pupil) + 20 * pupil for i in range(3)]
    return (c[0], c[1], c[2], 255 * body)


def chime(path):
    rate = 22050
    frames = []
    for i in range(int(rate * 0.45)):
        t = i / rate
        env = math.exp(-t * 7) * min(1.0, t / 0.004)
        v = 0.45 * math.sin(2 * math.pi * 1318.5 * t) + 0.25 * math.sin(2 * math.pi * 1975.5 * t + 0.5)
        v += 0.12 * math.sin(2 * math.pi * 2637.0 * t) * math.exp(-t * 12)
        frames.append(struct.pack("<h", int(max(-1, min(1, v * env)) * 32767)))
    with tempfile.TemporaryDirectory() as d:
        wav = os.path.join(d, "chime.wav")
        with wave.open(wav, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(b"".join(frames))
        if shutil.which("oggenc") is None:
            raise SystemExit("oggenc is missing: apt install vorbis-tools")
        subprocess.run(["oggenc", "-Q", "-q", "2", "--serial", "7", wav, "-o", path], check=True)


def main():
    os.makedirs(os.path.join(ROOT, "sprites"), exist_ok=True)
    os.makedirs(os.path.join(ROOT, "sounds"), exist_ok=True)
    png(os.path.join(ROOT, "sprites", "petal.png"), 24, 12, petal)
    png(os.path.join(ROOT, "sprites", "whirler.png"), 64, 64, whirler)
    chime(os.path.join(ROOT, "sounds", "chime.ogg"))


if __name__ == "__main__":
    main()
