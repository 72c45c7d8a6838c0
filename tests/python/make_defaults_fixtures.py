"""Fixtures for loaderx-cli/tests/convert_defaults.rs: inputs whose store
the converters' defaults decide, written by the real producers (Pillow,
pyarrow).

Usage: python make_defaults_fixtures.py DIR

Writes under DIR:

- `sizes/train/{cat,dog}/<k>.png`: six RGB photographs-to-be of two sizes
  (24 x 16 and 20 x 30), written by Pillow;
- `modes/train/{a,b}/<k>.png`: four 8 x 8 images, `a/0.png` and `a/1.png`
  mode L, `b/0.png` and `b/1.png` mode RGB;
- `text.parquet`: a string column `text` (some non-ASCII) and an int64
  column `label`, written by pyarrow;
- `text.jsonl`: the same rows as JSON lines.

Deterministic: the same inputs give the same files.
"""

import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

TEXTS = [
    "the first hour",
    "naïve café, déjà vu",
    "a longer line of text, " * 4,
    "短い文",
    "x",
]


def main(out):
    rng = np.random.default_rng(56)
    for k in range(6):
        cls = "cat" if k % 2 == 0 else "dog"
        h, w = (16, 24) if k < 3 else (30, 20)
        d = os.path.join(out, "sizes", "train", cls)
        os.makedirs(d, exist_ok=True)
        px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(px, "RGB").save(os.path.join(d, f"{k}.png"))
    for cls, mode in [("a", "L"), ("b", "RGB")]:
        d = os.path.join(out, "modes", "train", cls)
        os.makedirs(d, exist_ok=True)
        for k in range(2):
            shape = (8, 8) if mode == "L" else (8, 8, 3)
            px = rng.integers(0, 256, shape, dtype=np.uint8)
            Image.fromarray(px, mode).save(os.path.join(d, f"{k}.png"))
    labels = list(range(len(TEXTS)))
    table = pa.table({"text": pa.array(TEXTS, pa.string()), "label": pa.array(labels, pa.int64())})
    pq.write_table(table, os.path.join(out, "text.parquet"))
    with open(os.path.join(out, "text.jsonl"), "w", encoding="utf-8") as f:
        for t, label in zip(TEXTS, labels):
            f.write(json.dumps({"text": t, "label": label}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
