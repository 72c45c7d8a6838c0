"""The Python loaderx 2.8.19 peer of loaderx-bench: its Loader over a store
of the 2.8.19 generation, timed as `peers.py loader` times 2.4.6's.

Run with loaderx 2.8.19 importable (`PYTHONPATH=$LOADERX_PY_RELEASES/2.8.19`):

    peer_2_8_19.py loader --stream x=PATH [--stream y=PATH] --batch B
        --workers W --prefetch P --seed S --min-seconds T

Prints one JSON line with the fields of `peers.py loader`'s.
"""

import argparse
import importlib.metadata
import json
import os
import sys

from loaderx import Allocator, Loader
from loaderx.sampler import Sampler
from loaderx.zrecord import DenseStore, RaggedStore
from peer_common import time_loader

def log(message):
    print(f"[peer-2.8.19] {message}", file=sys.stderr, flush=True)


def _open_store(path):
    try:
        return DenseStore(path)
    except ValueError:
        return RaggedStore(path)


def _rows(value):
    """Records in one shard value: a Dense DLTensor or a RaggedBatch."""
    shapes = getattr(value, "shapes", None)
    if shapes is not None:
        return int(shapes.shape[0])
    return int(value.shape[0])


def cmd_loader(args):
    stores = {}
    for spec in args.stream:
        name, _, path = spec.partition("=")
        stores[name] = _open_store(path)
    batch = args.batch
    loader = None
    with Allocator("cpu") as allocator:
        try:
            streams = {name: [s.bind(allocator)] for name, s in stores.items()}
            n = len(next(iter(streams.values()))[0])
            sampler = Sampler(n, batch, Sampler.Mode.IID, seed=args.seed)
            loader = Loader(streams, sampler, workers=args.workers,
                            prefetch=max(1, args.prefetch))

            def check(shards):
                (shard,) = shards
                for name, value in shard.items():
                    if _rows(value) != batch:
                        raise RuntimeError(f"stream {name}: {_rows(value)} rows, want {batch}")

            timed = time_loader(lambda: next(loader), check, 2, args.min_seconds)
        finally:
            if loader is not None:
                loader.close()
            streams = None
    for s in stores.values():
        s.close()
    print(json.dumps({
        "cmd": "loader",
        "release": importlib.metadata.version("loaderx"),
        "batch": batch,
        "workers": args.workers,
        "prefetch": args.prefetch,
        "records_per_s": timed["batches_per_s"] * batch,
        **timed,
    }), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("loader")
    lo.add_argument("--stream", action="append", required=True)
    lo.add_argument("--batch", type=int, required=True)
    lo.add_argument("--workers", type=int, default=4)
    lo.add_argument("--prefetch", type=int, default=4)
    lo.add_argument("--seed", type=int, default=7)
    lo.add_argument("--min-seconds", type=float, default=1.0)
    lo.set_defaults(func=cmd_loader)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
