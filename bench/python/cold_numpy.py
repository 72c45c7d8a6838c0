#!/usr/bin/env python3
"""The NumPy contender of loaderx-bench's ``cold`` section.

Reads IID batches from ``np.load(path, mmap_mode='r')`` for a given time
and prints one JSON line: ``records_per_s`` and ``bytes_per_s`` (logical
bytes delivered).

    cold_numpy.py --batch B --seconds S --seed N data.npy
    cold_numpy.py --batch B --seconds S --seed N flat.npy offsets.npy

One ``.npy`` is a Dense array (records on axis 0), gathered by fancy
indexing (``arr[idx]``, a copy). Two are a Ragged store's flat elements
and its ``n + 1`` element offsets: each batch is the records' slices
concatenated, as a Ragged gather delivers them.
"""

import argparse
import json
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    if len(a.files) == 1:
        arr = np.load(a.files[0], mmap_mode="r")
        n = arr.shape[0]

        def gather(idx):
            return arr[idx]
    elif len(a.files) == 2:
        flat = np.load(a.files[0], mmap_mode="r")
        offsets = np.load(a.files[1])
        n = len(offsets) - 1

        def gather(idx):
            return np.concatenate([flat[offsets[i]:offsets[i + 1]] for i in idx])
    else:
        sys.exit("one .npy (Dense) or two (flat, offsets)")
    gather(rng.integers(0, n, a.batch))
    batches = nbytes = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        out = gather(rng.integers(0, n, a.batch))
        nbytes += out.nbytes
        batches += 1
    secs = time.perf_counter() - t0
    print(json.dumps({"records_per_s": batches * a.batch / secs,
                      "bytes_per_s": nbytes / secs}))


if __name__ == "__main__":
    main()
