#!/usr/bin/env python3
"""The Python loaderx 2.8.19 peer of loaderx-bench.

``peers.py`` measures PyPI loaderx 2.4.6; this script measures the 2.8.19
generation (a different API and on-disk format) with the same commands, so
their numbers can be set side by side. Run it with the release importable,
from the same interpreter::

    PYTHONPATH=$LOADERX_PY_RELEASES/2.8.19 python peer_2_8_19.py store ...
    PYTHONPATH=$LOADERX_PY_RELEASES/2.8.19 python peer_2_8_19.py loader ...

Each result is one JSON line on stdout, with the fields of the matching
``peers.py`` result plus ``release`` (the loaderx version from
``importlib.metadata``). Progress and errors go to stderr. Exit status: 0 on
success, 1 when a gathered record differs from its source, 2 on any other
error (bad arguments included).

Subcommands
-----------
``store``
    Takes exactly the arguments of ``peers.py store`` and reads the same
    source directory (Dense ``data.npy``; Ragged ``flat.npy`` +
    ``shapes.npy``). It writes a 2.8.19 store at ``OUT/<codec>`` with
    ``DenseWriter`` / ``RaggedWriter``, checks it and times random gathers
    from it, following the methodology in ``peers.py``'s docstring: warm
    source, write timed from the first ``append`` to ``close``, warm sweep,
    8 IID correctness batches from ``default_rng(seed)``, timed single gathers
    from ``default_rng(seed + 1)`` with the garbage collector paused. No
    ``numpy_mmap`` baseline row is printed here; ``peers.py`` prints it.

``loader``
    Times 2.8.19's ``Loader`` over already-built 2.8.19 stores, one CPU view
    per stream, and tracks the process's anonymous memory, as
    ``peers.py loader`` does for 2.4.6's ``DataLoader``. ``--workers 0`` (the
    synchronous loader) is allowed.

How 2.8.19 differs, and what that means for ``store``
-----------------------------------------------------
* Writing. A Dense source is passed to one ``append`` whole (the read-only
  memory map, which 2.8.19 reads in place); 2.8.19 documents that callers
  should not slice their input, where ``peers.py`` appends 2.4.6 64 MiB at a
  time. A Ragged source is handed over as one packed ``RaggedBatch`` built,
  untimed, straight from the source: ``values`` is the memory-mapped
  ``flat.npy``, ``cu_seqlens`` the int32 running element offsets, ``shapes``
  the shapes as uint32 (larger sources are rejected, as 2.8.19 cannot hold
  them). A ``zstd_dict`` dictionary is passed as ``dict_bytes`` (the ``--dict``
  file's bytes, as for 2.4.6). As with 2.4.6, nothing is fsync'ed: 2.8.19's
  writer ``close`` made no fsync/fdatasync call when traced with strace.
* Reading. An opened store cannot be indexed; it is bound to an
  ``Allocator('cpu')`` and the resulting view is indexed. The drawn uint64
  index array is passed to ``view[idx]`` as it is (2.8.19 converts any
  integer array to contiguous uint64 itself, so there is nothing to convert
  outside the timed region). Only that call is timed, and its result is left
  as the library returns it: a DLPack ``DLTensor`` for Dense, a
  ``RaggedBatch`` (``values``, int32 ``cu_seqlens``, uint32 ``shapes``) for
  Ragged; nothing is converted to NumPy in the timed region. Output memory
  comes from the allocator's pool: a result freed after its call (outside the
  timed region) is reused by a later one, which is how 2.8.19 is used.
* ``gather_logical_bytes`` counts the records' bytes, i.e. the DLTensor's
  bytes or the RaggedBatch's ``values`` bytes (not its offsets or shapes), as
  the 2.4.6 numbers count the returned arrays' bytes.
* Correctness compares, byte for byte and by shape and dtype, a Dense batch
  (``np.from_dlpack``) with ``data[idx]``, and a Ragged batch's ``values``
  with the concatenation of the source records, ``cu_seqlens`` with their
  running element offsets (from 0) and ``shapes`` with their shapes.

Only the standard library, NumPy and loaderx are used.
"""

import argparse
import importlib.metadata
import sys
import time
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Allocator, Loader
from loaderx.sampler import Sampler
from loaderx.zrecord import (
    DLTensor, DenseStore, DenseWriter, RaggedBatch, RaggedStore, RaggedWriter,
)
from peer_common import (
    APPEND_CHUNK_BYTES, CHECK_BATCHES, Mismatch,
    add_store_arguments, bytes_equal, disk_bytes, draw, emit, fresh_store_path,
    load_dense_source, load_ragged_source, non_negative_float, non_negative_int,
    positive_int, read_dict_arg, rows_per, run_command,
    sweep_check_time, time_loader, touch,
)

# Untimed batches the loader draws before timing.
LOADER_WARMUP = 2


def log(message):
    print(f"[peer-2.8.19] {message}", file=sys.stderr, flush=True)


def _release():
    """The loaderx version, which must be the imported package's."""
    version = importlib.metadata.version("loaderx")
    if version != loaderx.__version__:
        raise RuntimeError(f"importlib.metadata says loaderx {version}, but the "
                           f"imported package ({loaderx.__file__}) is "
                           f"{loaderx.__version__}")
    return version


# --------------------------------------------------------------------------
# store


def _result_nbytes(out):
    """Logical bytes of one gather result: the records' bytes."""
    if isinstance(out, RaggedBatch):
        return int(out.values.nbytes)
    return int(out.nbytes)


def _packed_source(src):
    """The whole ragged source as one CPU ``RaggedBatch``, without copying
    the values (they stay in the read-only mapping of ``flat.npy``)."""
    if int(src.offsets[-1]) > np.iinfo(np.int32).max:
        raise ValueError(f"{int(src.offsets[-1])} elements do not fit 2.8.19's "
                         "int32 cu_seqlens")
    if int(src.shapes.max()) > np.iinfo(np.uint32).max:
        raise ValueError("a record dimension does not fit 2.8.19's uint32 shapes")
    return RaggedBatch(np.asarray(src.flat),
                       src.offsets.astype(np.int32),
                       np.ascontiguousarray(src.shapes, dtype=np.uint32))


def _check_dense(view, data, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(data)
    for _ in range(CHECK_BATCHES):
        idx = draw(rng, n, batch)
        got = view[idx]
        if not isinstance(got, DLTensor):
            raise Mismatch(f"dense gather returned {type(got).__name__}, want DLTensor")
        got = np.from_dlpack(got)
        want = data[idx.astype(np.int64)]
        if not bytes_equal(got, want):
            raise Mismatch(f"dense batch differs from the source "
                           f"(got {got.shape} {got.dtype}, "
                           f"want {want.shape} {want.dtype})")


def _check_ragged(view, src, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(src.records)
    sizes = np.diff(src.offsets)
    for _ in range(CHECK_BATCHES):
        idx = draw(rng, n, batch)
        got = view[idx]
        if not isinstance(got, RaggedBatch):
            raise Mismatch(f"ragged gather returned {type(got).__name__}, "
                           "want RaggedBatch")
        sel = idx.astype(np.int64)
        want_cu = np.zeros(batch + 1, dtype=np.int64)
        np.cumsum(sizes[sel], out=want_cu[1:])
        want = {
            "values": np.concatenate([src.records[i].reshape(-1) for i in sel]),
            "cu_seqlens": want_cu.astype(np.int32),
            "shapes": src.shapes[sel].astype(np.uint32),
        }
        for name, expected in want.items():
            actual = np.from_dlpack(getattr(got, name))
            if bytes_equal(actual, expected):
                continue
            detail = (f"got {actual.shape} {actual.dtype}, "
                      f"want {expected.shape} {expected.dtype}")
            if name == "values" and actual.shape == expected.shape \
                    and actual.dtype == expected.dtype:
                for j, i in enumerate(sel.tolist()):
                    part = slice(int(want_cu[j]), int(want_cu[j + 1]))
                    if not bytes_equal(actual[part], expected[part]):
                        detail = f"first differing record: {i} (batch position {j})"
                        break
            raise Mismatch(f"ragged batch {name} differs from the source ({detail})")


def cmd_store(args):
    release = _release()
    source = Path(args.source)
    dict_bytes = read_dict_arg(args, log)

    if args.kind == "dense":
        data = load_dense_source(source)
        n = len(data)
        logical_bytes = int(data.nbytes)
        row_bytes = logical_bytes // n
        log(f"dense source {data.shape} {data.dtype}: warming page cache")
        touch(data, rows_per(APPEND_CHUNK_BYTES, row_bytes))
    else:
        src = load_ragged_source(source)
        n = len(src.records)
        logical_bytes = int(src.flat.nbytes)
        log(f"ragged source {n} records, {src.flat.dtype}: warming page cache")
        touch(src.flat, rows_per(APPEND_CHUNK_BYTES, src.flat.dtype.itemsize))

    # (a) write
    path = fresh_store_path(args.out, args.codec)
    if args.kind == "dense":
        writer = DenseWriter(path, data.dtype, data.shape[1:], codec=args.codec,
                             dict_bytes=dict_bytes, data_shards=args.shards)
        batch = data
    else:
        writer = RaggedWriter(path, src.flat.dtype, src.shapes.shape[1],
                              codec=args.codec, dict_bytes=dict_bytes,
                              data_shards=args.shards)
        batch = _packed_source(src)
    t0 = time.perf_counter()
    writer.append(batch)
    writer.close()
    write_s = time.perf_counter() - t0
    del writer, batch
    on_disk = disk_bytes(path)
    log(f"wrote {path} in {write_s:.3f} s, {on_disk} bytes on disk")

    # (b) open, bind, warm sweep, correctness
    store = (DenseStore if args.kind == "dense" else RaggedStore)(path)
    try:
        with Allocator("cpu") as allocator:
            view = store.bind(allocator)
            def check():
                if args.kind == "dense":
                    _check_dense(view, data, args.seed, args.batch)
                else:
                    _check_ragged(view, src, args.seed, args.batch)

            # (c) timed gathers, after the sweep and the check
            fields = sweep_check_time(view, n, args, check, log,
                                      nbytes=_result_nbytes)
            del view
    finally:
        store.close()

    emit({
        "cmd": "store",
        "release": release,
        "kind": args.kind,
        "codec": args.codec,
        "records": n,
        "logical_bytes": logical_bytes,
        "write_s": write_s,
        "disk_bytes": on_disk,
        **fields,
    })


# --------------------------------------------------------------------------
# loader


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
    release = _release()
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
                        raise Mismatch(f"stream {name}: {_rows(value)} rows, "
                                       f"want {batch}")

            timed = time_loader(lambda: next(loader), check, LOADER_WARMUP,
                                args.min_seconds)
        finally:
            if loader is not None:
                loader.close()
            streams = None
    for s in stores.values():
        s.close()
    emit({
        "cmd": "loader",
        "release": release,
        "batch": batch,
        "workers": args.workers,
        "prefetch": args.prefetch,
        "records_per_s": timed["batches_per_s"] * batch,
        **timed,
    })


# --------------------------------------------------------------------------
# command line


def build_parser():
    parser = argparse.ArgumentParser(
        description="Measure Python loaderx 2.8.19 as a peer of the Rust loaderx "
                    "benchmarks; prints one JSON object per line on stdout.")
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("store", help="write, check and time gathers from one store")
    add_store_arguments(p)
    p.set_defaults(func=cmd_store)

    p = sub.add_parser("loader", help="time the Loader over built 2.8.19 stores")
    p.add_argument("--stream", action="append", required=True, metavar="NAME=PATH")
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--workers", type=non_negative_int, default=4)
    p.add_argument("--prefetch", type=non_negative_int, default=4)
    p.add_argument("--seed", type=non_negative_int, default=7)
    p.add_argument("--min-seconds", type=non_negative_float, default=1.0)
    p.set_defaults(func=cmd_loader)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return run_command(args, log)


if __name__ == "__main__":
    sys.exit(main())
