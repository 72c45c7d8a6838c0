"""Fixtures for loaderx-cli/tests/convert_images_modes.rs: image folders of
PNG files Pillow wrote in every mode a PNG opens as (P with and without
transparency, 4-bit P, 1, L of 2 and 4 bits, RGB with a tRNS colour key, LA,
RGBA, I;16), WebP files (lossless RGB and RGBA, lossy RGB and RGBA), a CMYK
JPEG, a folder mixing
palette PNGs with RGB JPEGs, and a Parquet file of a Hugging Face `Image`
column holding palette PNG and WebP bytes, with what the stores must hold.

Usage: python make_image_mode_fixtures.py DIR

Writes under DIR:

- `cases/<case>/c/<k>.<ext>`: one image folder per case (one class `c`);
- `mixed/c/{a.png,b.jpg}`: a palette PNG beside an RGB JPEG;
- `hf/{palette,webp}.parquet`: `datasets`' Parquet of an `Image` column;
- `expected/<case>-<k>.bin`: PIL's `np.asarray(Image.open(f))` (C order,
  little-endian, bool as bytes 0/1), and `expected/<case>-<k>.RGB.bin`:
  `np.asarray(Image.open(f).convert("RGB"))`;
- `expected.json`: per case its mode, the files in record order and
  each one's shape (as opened and converted to RGB).
"""

import io
import json
import os
import sys

import numpy as np
from PIL import Image


def little(arr):
    arr = np.ascontiguousarray(arr)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    return arr.astype(arr.dtype.newbyteorder("<"))


def palette_image(w, h, seed, void=True):
    # Entries 1 and 2 share a colour: only the index tells them apart, as
    # two classes of a segmentation mask may.
    im = Image.new("P", (w, h))
    pal = [0, 0, 0, 128, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0, 0, 0, 128]
    im.putpalette(pal + [224, 224, 192] * (256 - len(pal) // 3))
    idx = [(x * 7 + y * 3 + seed) % 6 for y in range(h) for x in range(w)]
    if void:
        idx[0] = 255  # VOC's "void" label
    im.putdata(idx)
    return im


def gradient(mode, w, h, seed):
    bands = len(mode)
    y, x = np.mgrid[0:h, 0:w]
    arr = np.stack(
        [((x * 37 + y * 11 + 53 * c + seed * 17) % 256) for c in range(bands)], axis=-1
    ).astype(np.uint8)
    im = Image.fromarray(arr[..., 0] if bands == 1 else arr)
    assert im.mode == mode, (im.mode, mode)
    return im


def cases():
    """(case, extension, [(image, save options)])."""
    out = {}
    out["p"] = ("png", [(palette_image(5, 4, s), {}) for s in range(2)])
    out["p_trns"] = (
        "png",
        [(palette_image(5, 4, 0), {"transparency": 1}),
         (palette_image(5, 4, 1), {"transparency": bytes([255, 0, 128, 255, 7])})],
    )
    out["p4"] = ("png", [(palette_image(6, 3, s, void=False), {"bits": 4}) for s in range(2)])
    out["bilevel"] = (
        "png",
        [(gradient("L", 9, 3, s).point(lambda v: 255 * (v > 127)).convert("1"), {})
         for s in range(2)],
    )
    l2 = Image.new("L", (5, 2))
    l2.putdata([v % 4 for v in range(10)])
    l4 = Image.new("L", (5, 2))
    l4.putdata([v % 16 for v in range(10)])
    out["l2"] = ("png", [(l2, {"bits": 2})])
    out["l4"] = ("png", [(l4, {"bits": 4})])
    key = gradient("RGB", 4, 3, 0)
    out["rgb_key"] = (
        "png",
        [(key, {"transparency": tuple(int(v) for v in np.asarray(key)[1, 2])})],
    )
    out["la"] = ("png", [(gradient("LA", 4, 3, s), {}) for s in range(2)])
    out["rgba"] = ("png", [(gradient("RGBA", 4, 3, s), {}) for s in range(2)])
    i16 = Image.fromarray(
        (np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000).astype(np.uint16)
    )
    assert i16.mode == "I;16", i16.mode
    out["i16"] = ("png", [(i16, {})])
    out["webp_rgb"] = (
        "webp", [(gradient("RGB", 7, 5, s), {"lossless": True}) for s in range(2)]
    )
    out["webp_rgba"] = (
        "webp", [(gradient("RGBA", 7, 5, s), {"lossless": True}) for s in range(2)]
    )
    # Lossy WebP: noise, odd sizes, low and high quality, with alpha.
    rng = np.random.default_rng(5)
    for case, sizes in [
        ("webp_lossy", [(48, 64, 90, 3), (37, 53, 50, 3), (33, 17, 10, 3)]),
        ("webp_lossy_rgba", [(20, 30, 60, 4), (9, 41, 30, 4)]),
    ]:
        lossy = []
        for h, w, q, bands in sizes:
            arr = rng.integers(0, 256, (h, w, bands), dtype=np.uint8)
            arr[h // 2 :] = arr[h // 2 :] // 4 + 100
            lossy.append((Image.fromarray(arr), {"quality": q}))
        out[case] = ("webp", lossy)
    # A CMYK JPEG: stored as RGB (PIL's np.asarray is its 4 CMYK channels).
    y, x = np.mgrid[0:16, 0:24]
    cmyk = np.stack([(x * 10) % 256, (y * 15) % 256, (x + y) * 5 % 256, x * 3], axis=-1)
    out["cmyk"] = ("jpg", [(Image.fromarray(cmyk.astype(np.uint8), "CMYK"), {"quality": 95})])
    return out


def encoded(im, fmt, opts):
    b = io.BytesIO()
    im.save(b, fmt, **opts)
    return b.getvalue()


def main(root):
    os.makedirs(os.path.join(root, "expected"), exist_ok=True)
    expected = {}
    for case, (ext, images) in cases().items():
        d = os.path.join(root, "cases", case, "c")
        os.makedirs(d, exist_ok=True)
        files = []
        for k, (im, opts) in enumerate(images):
            data = encoded(im, {"png": "PNG", "webp": "WEBP", "jpg": "JPEG"}[ext], opts)
            name = f"{k}.{ext}"
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            opened = Image.open(io.BytesIO(data))
            arr = np.asarray(opened)
            entry = {"file": name, "mode": opened.mode, "shape": list(arr.shape),
                     "pixels": f"expected/{case}-{k}.bin"}
            with open(os.path.join(root, entry["pixels"]), "wb") as f:
                f.write(little(arr).tobytes())
            if opened.mode != "I;16":
                rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
                entry["rgb_shape"] = list(rgb.shape)
                entry["rgb_pixels"] = f"expected/{case}-{k}.RGB.bin"
                with open(os.path.join(root, entry["rgb_pixels"]), "wb") as f:
                    f.write(little(rgb).tobytes())
            files.append(entry)
        expected[case] = {"files": files}
    # A palette PNG beside an RGB JPEG: two modes.
    mixed = os.path.join(root, "mixed", "c")
    os.makedirs(mixed, exist_ok=True)
    with open(os.path.join(mixed, "a.png"), "wb") as f:
        f.write(encoded(palette_image(5, 4, 0), "PNG", {}))
    with open(os.path.join(mixed, "b.jpg"), "wb") as f:
        f.write(encoded(gradient("RGB", 5, 4, 0), "JPEG", {"quality": 95}))
    # A Hugging Face Image column (datasets' own Parquet writer).
    import datasets

    hf = os.path.join(root, "hf")
    os.makedirs(hf, exist_ok=True)
    for name, case, ext in [("palette", "p_trns", "png"), ("webp", "webp_rgba", "webp")]:
        rows = []
        for entry in expected[case]["files"]:
            with open(os.path.join(root, "cases", case, "c", entry["file"]), "rb") as f:
                rows.append({"bytes": f.read(), "path": entry["file"]})
        ds = datasets.Dataset.from_dict(
            {"image": rows}, features=datasets.Features({"image": datasets.Image()})
        )
        ds.to_parquet(os.path.join(hf, f"{name}.parquet"))
        expected[f"hf_{name}"] = case
    with open(os.path.join(root, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
