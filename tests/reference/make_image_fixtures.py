"""make_image_fixtures.py — writes tests/fixtures/image/ with Pillow as the independent reference.

  * flat_baseline.jpg, flat_progressive.jpg: 16×16 of RGB (200, 100, 50), baseline and
    progressive JPEG (the two decoder paths of stb_image);
  * ramp_gray_progressive.jpg: 24×8 gray, v = 10·x, progressive;
  * resize_src.png: a 23×17 RGB image of seeded random bytes, and resize_<w>x<h>.npy: Pillow's
    Image.resize(BILINEAR) of each channel taken as float32 ('F' mode, no rounding), shape
    (3, h, w), the reference for vitlens::resize_pixels.
  * rgba16_interlaced.png: 7×5 RGBA, 16 bits a sample, Adam7-interlaced, written here by hand
    (zlib + the PNG chunk layout, no Pillow), sample (y, x, c) = 4111·(1 + c) + 997·x + 3301·y;
    with thin_h2v2_progressive.jpg (1×300) and wide_h2v2_progressive.jpg (300×1), flat RGB
    (200, 100, 50) with 4:2:0 chroma subsampling: the decodes whose buffers stb sizes largest for
    their pixel count (16-bit rows, whole 16×16 MCUs around a 1-pixel side), kept inside
    image.cpp's allocation budget by the tests.

Run:  /usr/bin/python3 tests/reference/make_image_fixtures.py
"""

import os
import struct
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "image")

RESIZE_SIZES = [(64, 48), (7, 5), (16, 31), (23, 17)]  # (w, h): up, down, mixed, identity


def rgba16_sample(y, x, c):
    return (4111 * (1 + c) + 997 * x + 3301 * y) % 65536


def write_png_rgba16_interlaced(path, w, h):
    """A PNG with Adam7 interlacing, 16-bit RGBA, filter type 0 on every row."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]  # (x0, y0, dx, dy)
    raw = bytearray()
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, w, dx), range(y0, h, dy)
        if not xs or not ys:
            continue  # an empty pass has no rows, not even filter bytes
        for y in ys:
            raw.append(0)
            for x in xs:
                for c in range(4):
                    raw += struct.pack(">H", rgba16_sample(y, x, c))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 16, 6, 0, 0, 1)  # depth 16, RGBA, interlace 1
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) +
                chunk(b"IEND", b""))


def main():
    os.makedirs(OUT, exist_ok=True)

    flat = np.zeros((16, 16, 3), np.uint8)
    flat[...] = (200, 100, 50)
    Image.fromarray(flat).save(os.path.join(OUT, "flat_baseline.jpg"), quality=95)
    Image.fromarray(flat).save(os.path.join(OUT, "flat_progressive.jpg"), quality=95,
                               progressive=True)

    ramp = np.tile((np.arange(24) * 10).astype(np.uint8), (8, 1))
    Image.fromarray(ramp, "L").save(os.path.join(OUT, "ramp_gray_progressive.jpg"), quality=95,
                                    progressive=True)

    write_png_rgba16_interlaced(os.path.join(OUT, "rgba16_interlaced.png"), 7, 5)
    for name, (w, h) in (("thin", (1, 300)), ("wide", (300, 1))):
        img = np.zeros((h, w, 3), np.uint8)
        img[...] = (200, 100, 50)
        Image.fromarray(img).save(os.path.join(OUT, name + "_h2v2_progressive.jpg"), quality=95,
                                  progressive=True, subsampling=2)

    rng = np.random.default_rng(2024)
    src = rng.integers(0, 256, size=(17, 23, 3), dtype=np.uint8)
    Image.fromarray(src).save(os.path.join(OUT, "resize_src.png"))
    for w, h in RESIZE_SIZES:
        planes = [np.asarray(Image.fromarray(src[..., c].astype(np.float32), "F")
                             .resize((w, h), Image.BILINEAR)) for c in range(3)]
        np.save(os.path.join(OUT, "resize_%dx%d.npy" % (w, h)),
                np.stack(planes).astype(np.float32))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
