"""Fixtures for `loaderx info|digest|verify` on converted roots (loaderx-cli/tests/inspect.rs).

    python make_inspect_fixtures.py OUT

Each input is written by its real producer. OUT receives:

- `npy/x.npy` (float32, 12 x 4) and `npy/y.npy` (int64, 12), from numpy;
- `labelled.parquet`, written by `datasets` (`Dataset.to_parquet`), with a
  `ClassLabel` column `label` (cat, dog, emu), a `Sequence` of `ClassLabel`
  column `tags` (red, green) and a float list column `x`;
- `saved/`: the same Dataset, `save_to_disk`;
- `folder/`: an image folder (`train/` and `test/`, classes `cat` and
  `dog`), PNGs written by Pillow in two sizes (so `train/image` is Ragged);
- `expected.json`: the class names.
"""

import json
import os
import sys

import numpy as np
from PIL import Image

import datasets

datasets.disable_progress_bars()

OUT = sys.argv[1]
os.makedirs(os.path.join(OUT, "npy"), exist_ok=True)
rng = np.random.default_rng(56)

np.save(os.path.join(OUT, "npy", "x.npy"), rng.random((12, 4), dtype=np.float32))
np.save(os.path.join(OUT, "npy", "y.npy"), np.arange(12, dtype=np.int64) % 3)

labels = ["cat", "dog", "emu"]
colours = ["red", "green"]
features = datasets.Features(
    {
        "x": datasets.Sequence(datasets.Value("float32"), length=3),
        "label": datasets.ClassLabel(names=labels),
        "tags": datasets.Sequence(datasets.ClassLabel(names=colours)),
    }
)
rows = 10
ds = datasets.Dataset.from_dict(
    {
        "x": rng.random((rows, 3), dtype=np.float32).tolist(),
        "label": [i % 3 for i in range(rows)],
        "tags": [[j % 2 for j in range(1 + i % 3)] for i in range(rows)],
    },
    features=features,
)
ds.to_parquet(os.path.join(OUT, "labelled.parquet"))
ds.save_to_disk(os.path.join(OUT, "saved"))

for split, count in [("train", 3), ("test", 2)]:
    for c, name in enumerate(["cat", "dog"]):
        d = os.path.join(OUT, "folder", split, name)
        os.makedirs(d, exist_ok=True)
        for k in range(count):
            w, h = (6, 4) if k % 2 == 0 else (5, 7)
            if split == "test":
                w, h = 6, 4
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels, "RGB").save(os.path.join(d, f"{k}.png"))

with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump({"label": labels, "tags": colours, "folder": ["cat", "dog"]}, f)
