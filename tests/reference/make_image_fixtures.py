"""make_image_fixtures.py — writes tests/fixtures/image/ with Pillow as the independent reference.

  * flat_baseline.jpg, flat_progressive.jpg: 16×16 of RGB (200, 100, 50), baseline and
    progressive JPEG (the two decoder paths of stb_image);
  * ramp_gray_progressive.jpg: 24×8 gray, v = 10·x, progressive;
  * resize_src.png: a 23×17 RGB image of seeded random bytes, and resize_<w>x<h>.npy: Pillow's
    Image.resize(BILINEAR) of each channel taken as float32 ('F' mode, no rounding), shape
    (3, h, w), the reference for vitlens::resize_pixels.

Run:  /usr/bin/python3 tests/reference/make_image_fixtures.py
"""

import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "image")

RESIZE_SIZES = [(64, 48), (7, 5), (16, 31), (23, 17)]  # (w, h): up, down, mixed, identity


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
