"""Writes a raw Zrecord store with Python loaderx as a many-core machine would.

Python loaderx sizes its writer's lanes from the CPUs it sees (2.4.6:
``max(1, physical cores, 3/4 of logical CPUs)`` through
``loaderx._storage``; 2.8.19: ``3/4 of os.cpu_count()``), and its lanes
place their shard chunks (512 KiB each in 2.4.6) in the order they finish.
On a 2-core machine that is one or two lanes and a nearly ordered store; this
script raises the count it sees to ``--lanes`` before the first write, so the
store is laid out the way a workstation with that many CPUs would lay it out
(the lanes are real threads; which chunks finish first still depends on the
machine's scheduling).

Usage (2.8.19 from a release folder first on ``PYTHONPATH``)::

    python write_lanes.py --lanes 24 --kind dense --source DIR --out PATH

``DIR`` holds the ``.npy`` sources the Rust side writes (``data.npy`` for
Dense; ``flat.npy`` + ``shapes.npy`` for Ragged). Prints one JSON line:
the release, the lanes and the write time.
"""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_common import (APPEND_CHUNK_BYTES, load_dense_source,  # noqa: E402
                         load_ragged_source, positive_int, rows_per)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lanes", type=positive_int, required=True)
    p.add_argument("--kind", choices=["dense", "ragged"], required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--shards", type=positive_int, default=4)
    args = p.parse_args()
    lanes = args.lanes

    # Before loaderx builds its executor (on the first create).
    os.cpu_count = lambda: lanes
    import loaderx
    release = loaderx.__version__
    if release.startswith("2.4."):
        import loaderx._storage as storage
        storage._logical_cpu_count = lambda: lanes
        storage._physical_cpu_count = lambda logical: lanes

    shutil.rmtree(args.out, ignore_errors=True)
    t0 = time.perf_counter()
    if release.startswith("2.4."):
        from loaderx.zrecord import Dense, Ragged
        if args.kind == "dense":
            data = load_dense_source(args.source)
            ds = Dense.create(args.out, data.dtype, data.shape[1:], codec="raw",
                              data_shards=args.shards)
            step = rows_per(APPEND_CHUNK_BYTES, data.nbytes // len(data))
            for start in range(0, len(data), step):
                ds.append(data[start:start + step])
        else:
            src = load_ragged_source(args.source)
            ds = Ragged.create(args.out, src.flat.dtype, src.records[0].ndim,
                               codec="raw", data_shards=args.shards)
            ds.append(src.records)
        ds.close()
    else:
        import numpy as np
        from loaderx.zrecord import DenseWriter, RaggedBatch, RaggedWriter
        if args.kind == "dense":
            data = load_dense_source(args.source)
            w = DenseWriter(args.out, data.dtype, data.shape[1:], codec="raw",
                            data_shards=args.shards)
            w.append(np.asarray(data))
        else:
            src = load_ragged_source(args.source)
            w = RaggedWriter(args.out, src.flat.dtype, src.shapes.shape[1],
                             codec="raw", data_shards=args.shards)
            w.append(RaggedBatch(np.asarray(src.flat),
                                 src.offsets.astype(np.int32),
                                 np.ascontiguousarray(src.shapes, dtype=np.uint32)))
        w.close()
    print(json.dumps({"release": release, "lanes": lanes,
                      "write_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
