#!/usr/bin/env python3
"""The `vision` section's corpus: ImageNet-like photographs from Debian's
wallpaper packages, as image folders and loaderx stores.

    make_vision_data.py OUT [--n 20000 | --quick] [--png 2000] [--large 200] [--loaderx BIN]

Sources: the photographs among the wallpapers of `mate-backgrounds`
(nature/) and `plasma-workspace-wallpapers` (installed with
`apt-get install -y gnome-backgrounds mate-backgrounds
plasma-workspace-wallpapers`; GNOME 43's backgrounds are renders, not
photographs, and are not used), each at its largest size. Each of the N
images is a random region of a random source, resized to about 400x350 (the
width drawn from 330..470, the height from 280..420, as ImageNet's sizes
vary), sometimes mirrored, saved as a baseline JPEG of quality 90 (4:2:0);
the first --png of them also as PNG. The class of an image is its source.
--large more images of about 1600x1200 (a region of 1 to 1.5 times that
size, shrunk) measure decoding where a scaled decode can help.

Writes, under OUT:

    jpeg/<class>/<i>.jpg      the JPEG crops (an image folder)
    png/<class>/<i>.png       the PNG variant
    large/<class>/<i>.jpg     the ~1600x1200 JPEGs
    pixels/{image,label}.npy  the same crops already resized (shorter side
                              256, centre crop 224), u8[224,224,3], and the
                              labels (i64), in the folder's record order
    stores/jpeg/train/{image,label}    `loaderx convert images OUT/jpeg --encoded --codec raw`
    stores/png/train/{image,label}     the same for OUT/png
    stores/large/train/{image,label}   the same for OUT/large
    stores/pixels/train/{image,label}  `loaderx convert npy OUT/pixels/*.npy --codec raw`
    images.done, stores/done  written when the images, the stores are complete

The stores are made only with --loaderx (the `loaderx` CLI binary; a
second run with it converts images an earlier run made); the npy files are
removed once converted. Deterministic for a given --seed.
"""

import argparse
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

# The photographs among the wallpapers (the rest are renders or drawings).
MATE_NATURE = "/usr/share/backgrounds/mate/nature"
PLASMA = "/usr/share/wallpapers"
PLASMA_PHOTOS = [
    "BytheWater",
    "ColdRipple",
    "ColorfulCups",
    "DarkestHour",
    "EveningGlow",
    "FallenLeaf",
    "Grey",
    "Kite",
    "OneStandsOut",
    "Path",
    "summer_1am",
]
PACKAGES = "gnome-backgrounds mate-backgrounds plasma-workspace-wallpapers"
# Longest side a source is kept at in memory (the crops are far smaller).
SOURCE_MAX = 2560


def sources():
    """(class name, path) of every source photograph, sorted by name."""
    found = []
    if os.path.isdir(MATE_NATURE):
        for f in sorted(os.listdir(MATE_NATURE)):
            if f.lower().endswith((".jpg", ".jpeg", ".png")):
                found.append(("mate-" + os.path.splitext(f)[0], os.path.join(MATE_NATURE, f)))
    for name in PLASMA_PHOTOS:
        d = os.path.join(PLASMA, name, "contents", "images")
        if not os.path.isdir(d):
            continue
        # The largest real file (the other sizes are links to it).
        files = [os.path.realpath(os.path.join(d, f)) for f in os.listdir(d)]
        files = sorted(set(f for f in files if os.path.isfile(f)), key=os.path.getsize)
        if files:
            found.append(("plasma-" + name, files[-1]))
    if not found:
        sys.exit(f"no wallpapers found: apt-get install -y {PACKAGES}")
    return sorted(found)


def load(path):
    im = Image.open(path)
    im.draft("RGB", (SOURCE_MAX, SOURCE_MAX))
    im = im.convert("RGB")
    if max(im.size) > SOURCE_MAX:
        im.thumbnail((SOURCE_MAX, SOURCE_MAX), Image.LANCZOS)
    return im


_SOURCES = None


def _init(paths):
    global _SOURCES
    _SOURCES = [load(p) for p in paths]


def crop(rng, src, large=False):
    """One ImageNet-like image cut from `src` (`large`: about 1600x1200)."""
    if large:
        w, h = rng.randint(1500, 1700), rng.randint(1100, 1300)
    else:
        w, h = rng.randint(330, 470), rng.randint(280, 420)
    sw, sh = src.size
    w, h = min(w, sw), min(h, sh)
    # The region is 1x to (at most) 4x (large: 1.5x) the output, as large
    # as the source allows.
    most = min(sw / w, sh / h, 1.5 if large else 4.0)
    s = 1.0 if most <= 1.0 else rng.uniform(1.0, most)
    rw, rh = min(sw, round(w * s)), min(sh, round(h * s))
    x, y = rng.randint(0, sw - rw), rng.randint(0, sh - rh)
    im = src.crop((x, y, x + rw, y + rh)).resize((w, h), Image.BICUBIC, reducing_gap=2.0)
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return im


def resized_224(im):
    """Shorter side 256 (bilinear, antialiased), then the centre 224x224."""
    w, h = im.size
    if w < h:
        nw, nh = 256, round(h * 256 / w)
    else:
        nw, nh = round(w * 256 / h), 256
    im = im.resize((nw, nh), Image.BILINEAR)
    x, y = (nw - 224) // 2, (nh - 224) // 2
    return np.asarray(im.crop((x, y, x + 224, y + 224)), dtype=np.uint8)


def _make_large(job):
    """Writes large images [start, stop)."""
    start, stop, seed, out, names = job
    for i in range(start, stop):
        rng = random.Random(seed * 1_000_003 + 777_777_777 + i)
        k = rng.randrange(len(_SOURCES))
        im = crop(rng, _SOURCES[k], large=True)
        im.save(os.path.join(out, "large", names[k], f"{i:06d}.jpg"), quality=90)
    return stop - start


def _make(job):
    """Writes images [start, stop) and returns their 224x224 pixels."""
    start, stop, seed, out, names, png = job
    pixels = []
    for i in range(start, stop):
        rng = random.Random(seed * 1_000_003 + i)
        k = rng.randrange(len(_SOURCES))
        im = crop(rng, _SOURCES[k])
        name = f"{i:06d}"
        im.save(os.path.join(out, "jpeg", names[k], name + ".jpg"), quality=90)
        if i < png:
            im.save(os.path.join(out, "png", names[k], name + ".png"))
        pixels.append((names[k], name, k, resized_224(im)))
    return pixels


def make_images(out, n, png, large, seed, jobs):
    """The image folders, the 224x224 pixels and sources.json."""
    if os.path.exists(out):
        shutil.rmtree(out)
    srcs = sources()
    names = [c for c, _ in srcs]
    for d in ("jpeg", "png", "large"):
        for c in names:
            os.makedirs(os.path.join(out, d, c))
    chunk = 250
    work = [(s, min(s + chunk, n), seed, out, names, png) for s in range(0, n, chunk)]
    print(f"{n} images from {len(srcs)} photographs with {jobs} processes", file=sys.stderr)
    rows = []
    with multiprocessing.Pool(jobs, _init, ([pth for _, pth in srcs],)) as pool:
        for part in pool.imap(_make, work):
            rows.extend(part)
            print(f"  {len(rows)}/{n}", file=sys.stderr, flush=True)
        big = [(s, min(s + 10, large), seed, out, names) for s in range(0, large, 10)]
        print(f"  {sum(pool.map(_make_large, big))} large", file=sys.stderr, flush=True)
    # The stores' record order: the image folder's (by class, then file).
    rows.sort(key=lambda r: (r[0], r[1]))
    # A class without images in a smaller variant is no class of it.
    for d in ("png", "large"):
        for c in names:
            if not os.listdir(os.path.join(out, d, c)):
                os.rmdir(os.path.join(out, d, c))
    os.makedirs(os.path.join(out, "pixels"))
    image = np.lib.format.open_memmap(
        os.path.join(out, "pixels", "image.npy"), mode="w+", dtype=np.uint8, shape=(n, 224, 224, 3)
    )
    for j, r in enumerate(rows):
        image[j] = r[3]
    image.flush()
    del image
    np.save(os.path.join(out, "pixels", "label.npy"), np.array([r[2] for r in rows], dtype=np.int64))
    with open(os.path.join(out, "sources.json"), "w") as f:
        json.dump({"images": n, "png": png, "large": large, "seed": seed, "sources": dict(srcs)}, f, indent=1)
    with open(os.path.join(out, "images.done"), "w") as f:
        f.write("complete\n")


def make_stores(out, loaderx):
    """The stores, through the loaderx CLI; then the npy files go."""
    stores = os.path.join(out, "stores")
    if os.path.exists(stores):
        shutil.rmtree(stores)
    os.makedirs(stores)
    for d in ("jpeg", "png", "large"):
        run([loaderx, "convert", "images", os.path.join(out, d), "-o", os.path.join(stores, d),
             "--encoded", "--codec", "raw"])
    run([loaderx, "convert", "npy", os.path.join(out, "pixels", "image.npy"),
         os.path.join(out, "pixels", "label.npy"), "-o", os.path.join(stores, "pixels"),
         "--codec", "raw"])
    shutil.rmtree(os.path.join(out, "pixels"))
    with open(os.path.join(stores, "done"), "w") as f:
        f.write("complete\n")


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--n", type=int, default=20_000, help="images (default 20000)")
    p.add_argument("--quick", action="store_true", help="1000 images, 200 PNGs, 20 large")
    p.add_argument("--png", type=int, default=2_000, help="images also written as PNG (default 2000)")
    p.add_argument("--large", type=int, default=200, help="~1600x1200 JPEGs (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--loaderx", help="the loaderx CLI binary: also write the stores")
    a = p.parse_args()
    n, png, large = (1_000, 200, 20) if a.quick else (a.n, min(a.png, a.n), a.large)
    out = a.out
    if not os.path.exists(os.path.join(out, "images.done")):
        make_images(out, n, png, large, a.seed, a.jobs)
    if a.loaderx and not os.path.exists(os.path.join(out, "stores", "done")):
        make_stores(out, a.loaderx)
    print(f"{out}: {n} JPEGs, {png} PNGs, {large} large JPEGs", file=sys.stderr)


if __name__ == "__main__":
    main()
