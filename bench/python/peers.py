#!/usr/bin/env python3
"""Python peer measurements for the loaderx benchmark suite.

The Rust benchmark harness runs this script as a child process to measure the
reference implementation, PyPI ``loaderx==2.4.6``, on exactly the data the
Rust side measures. Every result is printed to stdout as one JSON object on
its own line; progress and errors go to stderr, and a non-zero exit status
means the measurement failed (1: a gathered record differed from its source,
2: any other error, including bad arguments).

Subcommands
-----------
``store``
    Builds a store from a source directory written by the Rust side, checks
    it, and times random gathers from it.

    * Dense source: ``DIR/data.npy``, shape ``(N, *item_shape)``.
    * Ragged source: ``DIR/flat.npy`` (1-D, every record's elements
      concatenated) and ``DIR/shapes.npy`` (``N x ndim`` uint64). Record ``i``
      is ``flat[off[i]:off[i + 1]].reshape(shapes[i])`` where ``off`` is the
      running sum of the per-record element counts.

    Both are memory-mapped. The store is created at ``OUT/<codec>``.

``sampler``
    Times the native IID index sampler (``Sampler.next``).

``loader``
    Times the threaded ``DataLoader`` over already-built stores and tracks the
    process's anonymous memory while it runs.

Methodology
-----------
* Warm page cache. Each source is read once in full before anything is
  timed, and each store is swept once in full (every record, in chunks of 4096
  indices) after it is opened and before its gathers are timed. The numbers
  describe in-memory decode and copy speed, not device I/O.
* Write time (``write_s``) starts right before the first ``append`` and ends
  after ``close``, which publishes the store (its logical finalize). Creating
  the store, reading the dictionary and building the ragged record views are
  not timed. Nothing is fsync'ed, so the data may still be in dirty pages when
  the clock stops. Dense sources are appended in chunks of at most 64 MiB;
  ragged sources are appended as one list of records.
* Sampler time is excluded from gather timings. Indices are drawn with
  ``numpy.random.default_rng`` outside the timed region; only the single
  ``ds[idx]`` call is timed, with ``time.perf_counter`` around it.
* Output allocation is included: every timed gather allocates and fills a
  fresh result (one array for dense stores, a list of arrays for ragged
  stores), as the library always does. Freeing the previous result happens
  outside the timed region.
* Each timed loop runs until the timed seconds add up to ``--min-seconds``
  (and at least 3 gather calls). ``p95_ms`` is the 95th percentile of the
  per-call latencies (NumPy's default linear interpolation).
* Python's cyclic garbage collector is paused during the ``store`` and
  ``sampler`` timed loops (nothing measured there creates reference cycles,
  so a collection would only add noise). The ``loader`` measurement leaves it
  running, like a real training loop.
* Correctness is checked before any timing: 8 IID batches drawn with
  ``default_rng(seed)`` are gathered and compared byte for byte (and by shape
  and dtype) to the source. The timed loops use ``default_rng(seed + 1)``.
* ``disk_bytes`` counts allocated blocks (``st_blocks * 512``) of every file
  in the store directory, so sparse or not-yet-allocated space is not counted.
* The baseline for a raw dense store (``cmd: numpy_mmap``) is NumPy fancy
  indexing into the memory-mapped ``data.npy``: ``arr[idx]`` with the same
  index sequence (``default_rng(seed + 1)``, converted to int64 outside the
  timed region), timed the same way.
* The loader is timed by wall clock across consecutive ``next()`` calls
  after ``--warmup`` untimed batches, because its gather and transform
  threads work ahead of the consumer. A background thread reads
  ``/proc/self/status`` every 5 ms from just before the loader is built until
  the timed loop ends and keeps the largest ``RssAnon``; ``VmHWM`` (peak
  resident set, file-backed pages included, over the whole process life) is
  read once at the end.

Only the standard library, NumPy and loaderx are used.
"""

import argparse
import gc
import json
import math
import os
import stat
import sys
import time
import traceback
from array import array
from pathlib import Path

import numpy as np

from loaderx.dataloader import DataLoader
from loaderx.zrecord import Dense, Ragged
from loaderx.zsampler import Sampler
from peer_common import time_loader

# Indices per call in the untimed full sweeps.
SWEEP_CHUNK = 4096
# Largest dense append, in bytes.
APPEND_CHUNK_BYTES = 64 << 20
# Batches drawn by the correctness check.
CHECK_BATCHES = 8
# Fewest timed gather calls, however long each one takes.
MIN_GATHER_CALLS = 3
# Sampler calls per timed chunk, to keep perf_counter overhead negligible.
SAMPLER_CHUNK = 100
# Interval between /proc/self/status samples in the loader, in seconds.

CODECS = ("raw", "zstd", "zstd_dict")
IID = Sampler.Mode.IID

# Result lines go to a private duplicate of the original stdout; file
# descriptor 1 itself is pointed at stderr, so nothing else (a stray print, a
# native library writing to fd 1) can end up in the JSON stream.
_RESULTS = None


class Mismatch(Exception):
    """A gathered record differs from its source record."""


def log(message):
    print(f"[peers] {message}", file=sys.stderr, flush=True)


def emit(record):
    _RESULTS.write(json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n")
    _RESULTS.flush()


def _redirect_stdout():
    global _RESULTS
    sys.stdout.flush()
    _RESULTS = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


# --------------------------------------------------------------------------
# helpers


class _GcPaused:
    """Pause the cyclic garbage collector inside a ``with`` block."""

    def __enter__(self):
        gc.collect()
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self._was_enabled:
            gc.enable()


def _bytes_equal(a, b):
    """Bitwise equality of two arrays, including shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    return np.array_equal(a, b)


def _record_nbytes(result):
    """Logical bytes of a gather result (an array or a list of arrays)."""
    if isinstance(result, np.ndarray):
        return int(result.nbytes)
    return int(sum(record.nbytes for record in result))


def _draw(rng, n, batch):
    return rng.integers(0, n, batch, dtype=np.uint64)


def _disk_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_blocks * 512
    return total


def _touch(array_like, rows_per_chunk):
    """Read every element once so its pages are in the page cache."""
    n = len(array_like)
    for start in range(0, n, rows_per_chunk):
        np.array(array_like[start:start + rows_per_chunk], copy=True)


def _rows_per(chunk_bytes, row_bytes):
    return max(1, chunk_bytes // max(1, row_bytes))


def _time_gathers(gather, n, batch, rng, min_seconds, prepare=None):
    """Time single ``gather(idx)`` calls until ``min_seconds`` accumulate.

    ``prepare`` (untimed) converts each drawn uint64 index array first.
    Returns the gather fields of a result line.
    """
    latencies = array("d")
    total = 0.0
    logical = 0
    with _GcPaused():
        while total < min_seconds or len(latencies) < MIN_GATHER_CALLS:
            idx = _draw(rng, n, batch)
            if prepare is not None:
                idx = prepare(idx)
            t0 = time.perf_counter()
            out = gather(idx)
            t1 = time.perf_counter()
            dt = t1 - t0
            latencies.append(dt)
            total += dt
            logical += _record_nbytes(out)
            del out
    calls = len(latencies)
    return {
        "gather_calls": calls,
        "gather_s": total,
        "gather_records": calls * batch,
        "gather_logical_bytes": logical,
        "p95_ms": float(np.percentile(np.frombuffer(latencies), 95)) * 1e3,
    }


def _fresh_store_path(out_dir, codec):
    """``out_dir/codec``, removing a previous store there (``*.zr`` files only)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / codec
    if path.exists() or path.is_symlink():
        if not path.is_dir() or path.is_symlink():
            raise RuntimeError(f"{path} exists and is not a store directory")
        entries = list(path.iterdir())
        if any(not (e.is_file() and not e.is_symlink() and e.suffix == ".zr")
               for e in entries):
            raise RuntimeError(f"{path} exists and holds files other than *.zr; "
                               "refusing to delete it")
        for entry in entries:
            entry.unlink()
        path.rmdir()
    return path


# --------------------------------------------------------------------------
# store


def _load_dense_source(source):
    data = np.load(source / "data.npy", mmap_mode="r")
    if data.ndim < 1 or len(data) == 0:
        raise ValueError(f"{source / 'data.npy'} must hold at least one record")
    return data


def _load_ragged_source(source):
    flat = np.load(source / "flat.npy", mmap_mode="r")
    shapes = np.load(source / "shapes.npy", mmap_mode="r")
    if flat.ndim != 1:
        raise ValueError("flat.npy must be one-dimensional")
    if shapes.ndim != 2 or shapes.shape[0] == 0 or shapes.shape[1] == 0:
        raise ValueError("shapes.npy must be N x ndim with N, ndim >= 1")
    if shapes.dtype != np.uint64:
        raise ValueError(f"shapes.npy must be uint64, got {shapes.dtype}")
    shape_list = np.asarray(shapes).tolist()
    counts = [math.prod(shape) for shape in shape_list]
    if sum(counts) != flat.size:
        raise ValueError(f"shapes.npy describes {sum(counts)} elements, "
                         f"flat.npy holds {flat.size}")
    base = np.asarray(flat)  # plain ndarray view of the mapping
    records = []
    offset = 0
    for shape, count in zip(shape_list, counts):
        records.append(base[offset:offset + count].reshape(shape))
        offset += count
    return flat, records


def _check_dense(ds, data, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(data)
    for _ in range(CHECK_BATCHES):
        idx = _draw(rng, n, batch)
        got = ds[idx]
        want = data[idx.astype(np.int64)]
        if not isinstance(got, np.ndarray) or not _bytes_equal(got, want):
            raise Mismatch(f"dense batch differs from the source "
                           f"(got shape {getattr(got, 'shape', None)}, "
                           f"want {want.shape})")


def _check_ragged(ds, records, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(records)
    for _ in range(CHECK_BATCHES):
        idx = _draw(rng, n, batch)
        got = ds[idx]
        if len(got) != batch:
            raise Mismatch(f"ragged gather returned {len(got)} records, want {batch}")
        for i, record in zip(idx.tolist(), got):
            if not _bytes_equal(record, records[i]):
                raise Mismatch(f"ragged record {i} differs from the source "
                               f"(got shape {record.shape} {record.dtype}, "
                               f"want {records[i].shape} {records[i].dtype})")


def cmd_store(args):
    source = Path(args.source)
    dict_bytes = None
    if args.codec == "zstd_dict":
        if args.dict is None:
            raise ValueError("--codec zstd_dict needs --dict FILE")
        dict_bytes = Path(args.dict).read_bytes()
    elif args.dict is not None:
        log(f"--dict ignored for codec {args.codec}")

    if args.kind == "dense":
        data = _load_dense_source(source)
        n = len(data)
        logical_bytes = int(data.nbytes)
        row_bytes = logical_bytes // n
        records = None
        log(f"dense source {data.shape} {data.dtype}: warming page cache")
        _touch(data, _rows_per(APPEND_CHUNK_BYTES, row_bytes))
    else:
        flat, records = _load_ragged_source(source)
        n = len(records)
        logical_bytes = int(flat.nbytes)
        log(f"ragged source {n} records, {flat.dtype}: warming page cache")
        _touch(flat, _rows_per(APPEND_CHUNK_BYTES, flat.dtype.itemsize))

    # (a) write
    path = _fresh_store_path(args.out, args.codec)
    if args.kind == "dense":
        ds = Dense.create(path, data.dtype, data.shape[1:], codec=args.codec,
                          dict_bytes=dict_bytes, data_shards=args.shards)
        step = _rows_per(APPEND_CHUNK_BYTES, row_bytes)
        chunks = [data[start:start + step] for start in range(0, n, step)]
        t0 = time.perf_counter()
        for chunk in chunks:
            ds.append(chunk)
        ds.close()
        write_s = time.perf_counter() - t0
    else:
        ds = Ragged.create(path, flat.dtype, records[0].ndim, codec=args.codec,
                           dict_bytes=dict_bytes, data_shards=args.shards)
        t0 = time.perf_counter()
        ds.append(records)
        ds.close()
        write_s = time.perf_counter() - t0
    del ds
    disk_bytes = _disk_bytes(path)
    log(f"wrote {path} in {write_s:.3f} s, {disk_bytes} bytes on disk")

    # (b) open, warm sweep, correctness
    ds = (Dense if args.kind == "dense" else Ragged).open(path)
    try:
        if len(ds) != n:
            raise Mismatch(f"store holds {len(ds)} records, source {n}")
        for start in range(0, n, SWEEP_CHUNK):
            ds[np.arange(start, min(n, start + SWEEP_CHUNK), dtype=np.uint64)]
        if args.kind == "dense":
            _check_dense(ds, data, args.seed, args.batch)
        else:
            _check_ragged(ds, records, args.seed, args.batch)
        log(f"checked {CHECK_BATCHES} batches of {args.batch}; timing gathers")

        # (c) timed gathers
        rng = np.random.default_rng(args.seed + 1)
        fields = _time_gathers(ds.__getitem__, n, args.batch, rng, args.min_seconds)
    finally:
        ds.close()

    emit({
        "cmd": "store",
        "kind": args.kind,
        "codec": args.codec,
        "records": n,
        "logical_bytes": logical_bytes,
        "write_s": write_s,
        "disk_bytes": disk_bytes,
        **fields,
    })

    if args.kind == "dense" and args.codec == "raw":
        log("timing NumPy mmap fancy indexing on data.npy")
        arr = np.load(source / "data.npy", mmap_mode="r")
        _touch(arr, SWEEP_CHUNK)
        rng = np.random.default_rng(args.seed + 1)
        fields = _time_gathers(arr.__getitem__, n, args.batch, rng,
                               args.min_seconds,
                               prepare=lambda idx: idx.astype(np.int64))
        emit({
            "cmd": "numpy_mmap",
            "kind": "dense",
            "records": n,
            "logical_bytes": logical_bytes,
            **fields,
        })


# --------------------------------------------------------------------------
# sampler


def cmd_sampler(args):
    n, batch = args.n, args.batch
    with Sampler(n, batch, IID, args.seed) as check:
        for _ in range(16):
            idx = check.next()
            if idx.dtype != np.uint64 or idx.shape != (batch,):
                raise Mismatch(f"sampler returned {idx.dtype} {idx.shape}, "
                               f"want uint64 ({batch},)")
            if int(idx.max()) >= n:
                raise Mismatch(f"sampler index {int(idx.max())} >= n={n}")

    calls = 0
    seconds = 0.0
    with Sampler(n, batch, IID, args.seed) as sampler, _GcPaused():
        draw = sampler.next
        chunk = range(SAMPLER_CHUNK)
        while True:
            t0 = time.perf_counter()
            for _ in chunk:
                draw()
            seconds += time.perf_counter() - t0
            calls += SAMPLER_CHUNK
            if seconds >= args.min_seconds:
                break

    emit({
        "cmd": "sampler",
        "batch": batch,
        "calls": calls,
        "seconds": seconds,
        "indices_per_s": calls * batch / seconds,
    })


# --------------------------------------------------------------------------
# loader


def _open_stream(path):
    try:
        return Dense.open(path)
    except ValueError:
        # The schema is not a dense one; fall through to the ragged reader.
        return Ragged.open(path)


def _parse_stream(text):
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, path


def cmd_loader(args):
    streams = {}
    for name, path in args.stream:
        if name in streams:
            raise ValueError(f"stream {name!r} given twice")
        streams[name] = _open_stream(path)
        log(f"stream {name}: {type(streams[name]).__name__} "
            f"{len(streams[name])} records ({streams[name].codec})")
    batch = args.batch

    def check(item):
        if set(item) != set(streams):
            raise Mismatch(f"batch streams {sorted(item)} != {sorted(streams)}")
        for name, values in item.items():
            if len(values) != batch:
                raise Mismatch(f"stream {name}: {len(values)} rows, want {batch}")

    loader = None
    try:
        loader = DataLoader(streams, transform_workers=args.workers,
                            batch_size=batch, prefetch_size=args.prefetch,
                            mode=IID, seed=args.seed)
        timed = time_loader(lambda: next(loader), check, args.warmup, args.min_seconds)
    finally:
        if loader is not None:
            loader.close()
        for ds in streams.values():
            ds.close()

    emit({
        "cmd": "loader",
        "batch": batch,
        "workers": args.workers,
        "prefetch": args.prefetch,
        "records_per_s": timed["batches_per_s"] * batch,
        **timed,
    })


# --------------------------------------------------------------------------
# command line


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be non-negative, got {value}")
    return value


def _non_negative_float(text):
    value = float(text)
    if not value >= 0.0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite non-negative number, got {text}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        description="Measure PyPI loaderx as the peer of the Rust loaderx benchmarks; "
                    "prints one JSON object per line on stdout.")
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("store", help="write, check and time gathers from one store")
    p.add_argument("--kind", choices=("dense", "ragged"), required=True)
    p.add_argument("--source", required=True, help="source directory (.npy files)")
    p.add_argument("--codec", choices=CODECS, required=True)
    p.add_argument("--dict", help="zstd dictionary file (zstd_dict only)")
    p.add_argument("--batch", type=_positive_int, required=True)
    p.add_argument("--seed", type=_non_negative_int, required=True)
    p.add_argument("--min-seconds", type=_non_negative_float, default=2.0)
    p.add_argument("--out", required=True, help="the store is written to OUT/<codec>")
    p.add_argument("--shards", type=_positive_int, default=4)
    p.set_defaults(func=cmd_store)

    p = sub.add_parser("sampler", help="time the IID index sampler")
    p.add_argument("--n", type=_positive_int, default=1_000_000)
    p.add_argument("--batch", type=_positive_int, required=True)
    p.add_argument("--seed", type=_non_negative_int, required=True)
    p.add_argument("--min-seconds", type=_non_negative_float, default=2.0)
    p.set_defaults(func=cmd_sampler)

    p = sub.add_parser("loader", help="time the DataLoader over built stores")
    p.add_argument("--stream", type=_parse_stream, action="append", required=True,
                   metavar="NAME=PATH")
    p.add_argument("--batch", type=_positive_int, required=True)
    p.add_argument("--workers", type=_positive_int, required=True)
    p.add_argument("--prefetch", type=_positive_int, required=True)
    p.add_argument("--seed", type=_non_negative_int, required=True)
    p.add_argument("--warmup", type=_non_negative_int, default=5)
    p.add_argument("--min-seconds", type=_non_negative_float, default=3.0)
    p.set_defaults(func=cmd_loader)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    _redirect_stdout()
    try:
        args.func(args)
    except Mismatch as exc:
        log(f"MISMATCH: {exc}")
        return 1
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
