"""The files of the README's quick start, as a newcomer has them.

Usage: make_readme_fixtures.py DIR

- data.npy: uint8 (300, 28, 28) images; label.npy: int64 (300,) classes
  (np.save);
- reviews.parquet: a text column and an int64 label (written by the
  `datasets` library, as a Hub download is);
- table.csv: a header, an int, a float, a string and a bool column
  (Python's csv module, with a quoted field holding the delimiter);
- photos/<class>/*.jpg: JPEGs of different sizes in two classes (PIL).
"""

import csv
import os
import sys

import numpy as np
from datasets import Dataset
from PIL import Image

out = sys.argv[1]
os.makedirs(out)
rng = np.random.default_rng(7)

np.save(os.path.join(out, "data.npy"), rng.integers(0, 256, (300, 28, 28), dtype=np.uint8))
np.save(os.path.join(out, "label.npy"), rng.integers(0, 10, 300).astype(np.int64))

texts = [f"review {i}: " + "good " * (i % 7) + "and fine" for i in range(200)]
Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(200)]}).to_parquet(
    os.path.join(out, "reviews.parquet")
)

with open(os.path.join(out, "table.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "score", "name", "ok"])
    for i in range(50):
        w.writerow([i, i / 4, f"name {i}, the {i}th", "true" if i % 3 else "false"])

for c, cls in enumerate(["cat", "dog"]):
    os.makedirs(os.path.join(out, "photos", cls))
    for i in range(20):
        size = (64 + 8 * (i % 3), 48 + 4 * (i % 5))
        pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(os.path.join(out, "photos", cls, f"{i:03d}.jpg"), quality=90)
