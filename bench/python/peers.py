#!/usr/bin/env python3
"""Python peer measurements for the loaderx benchmark suite.

The Rust benchmark harness runs this script as a child process to measure the
reference implementation, PyPI ``loaderx==2.4.6``, on exactly the data the
Rust side measures. Every result is printed to stdout as one JSON object on
its own line; progress and errors go to stderr, and a non-zero exit status
means the measurement failed (1: a gathered record differed from its source,
2: any other error, including bad arguments).

``peer_2_8_19.py`` is the sibling peer for loaderx 2.8.19: its ``store``
takes the same arguments and follows the methodology below, and its
``loader`` mirrors the one here. What does not depend on the loaderx release
(the JSON result stream, exit statuses, argument checks, source loading, the
timed gather and loader loops, memory readings) lives in ``peer_common.py``,
which both import.

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

    Both are memory-mapped. The store is created at ``OUT/<codec>``; a store
    already there, holding nothing but ``*.zr`` files, is replaced. A
    ``zstd_dict`` store takes its dictionary from ``--dict FILE`` (the harness
    trains it). For a raw Dense store a second line (``cmd: numpy_mmap``)
    times the NumPy baseline described below.

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
import sys
import time
from pathlib import Path

import numpy as np

from loaderx.dataloader import DataLoader
from loaderx.zrecord import Dense, Ragged
from loaderx.zsampler import Sampler
from peer_common import (
    APPEND_CHUNK_BYTES, CHECK_BATCHES, SWEEP_CHUNK, GcPaused, Mismatch,
    add_store_arguments, bytes_equal, disk_bytes, draw, emit,
    fresh_store_path, load_dense_source, load_ragged_source, non_negative_float,
    non_negative_int, positive_int, read_dict_arg, rows_per, run_command,
    sweep_check_time, time_gathers, time_loader, touch,
)

# Sampler calls per timed chunk, to keep perf_counter overhead negligible.
SAMPLER_CHUNK = 100

IID = Sampler.Mode.IID


def log(message):
    print(f"[peers] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# store


def _check_dense(ds, data, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(data)
    for _ in range(CHECK_BATCHES):
        idx = draw(rng, n, batch)
        got = ds[idx]
        want = data[idx.astype(np.int64)]
        if not isinstance(got, np.ndarray) or not bytes_equal(got, want):
            raise Mismatch(f"dense batch differs from the source "
                           f"(got shape {getattr(got, 'shape', None)}, "
                           f"want {want.shape})")


def _check_ragged(ds, records, seed, batch):
    rng = np.random.default_rng(seed)
    n = len(records)
    for _ in range(CHECK_BATCHES):
        idx = draw(rng, n, batch)
        got = ds[idx]
        if len(got) != batch:
            raise Mismatch(f"ragged gather returned {len(got)} records, want {batch}")
        for i, record in zip(idx.tolist(), got):
            if not bytes_equal(record, records[i]):
                raise Mismatch(f"ragged record {i} differs from the source "
                               f"(got shape {record.shape} {record.dtype}, "
                               f"want {records[i].shape} {records[i].dtype})")


def cmd_store(args):
    source = Path(args.source)
    dict_bytes = read_dict_arg(args, log)

    if args.kind == "dense":
        data = load_dense_source(source)
        n = len(data)
        logical_bytes = int(data.nbytes)
        row_bytes = logical_bytes // n
        records = None
        log(f"dense source {data.shape} {data.dtype}: warming page cache")
        touch(data, rows_per(APPEND_CHUNK_BYTES, row_bytes))
    else:
        ragged = load_ragged_source(source)
        flat, records = ragged.flat, ragged.records
        n = len(records)
        logical_bytes = int(flat.nbytes)
        log(f"ragged source {n} records, {flat.dtype}: warming page cache")
        touch(flat, rows_per(APPEND_CHUNK_BYTES, flat.dtype.itemsize))

    # (a) write
    path = fresh_store_path(args.out, args.codec)
    if args.kind == "dense":
        ds = Dense.create(path, data.dtype, data.shape[1:], codec=args.codec,
                          dict_bytes=dict_bytes, data_shards=args.shards)
        step = rows_per(APPEND_CHUNK_BYTES, row_bytes)
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
    on_disk = disk_bytes(path)
    log(f"wrote {path} in {write_s:.3f} s, {on_disk} bytes on disk")

    # (b) open, warm sweep, correctness
    ds = (Dense if args.kind == "dense" else Ragged).open(path)
    try:
        def check():
            if args.kind == "dense":
                _check_dense(ds, data, args.seed, args.batch)
            else:
                _check_ragged(ds, records, args.seed, args.batch)

        # (c) timed gathers, after the sweep and the check
        fields = sweep_check_time(ds, n, args, check, log)
    finally:
        ds.close()

    emit({
        "cmd": "store",
        "kind": args.kind,
        "codec": args.codec,
        "records": n,
        "logical_bytes": logical_bytes,
        "write_s": write_s,
        "disk_bytes": on_disk,
        **fields,
    })

    if args.kind == "dense" and args.codec == "raw":
        log("timing NumPy mmap fancy indexing on data.npy")
        arr = np.load(source / "data.npy", mmap_mode="r")
        touch(arr, SWEEP_CHUNK)
        rng = np.random.default_rng(args.seed + 1)
        fields = time_gathers(arr.__getitem__, n, args.batch, rng,
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
    with Sampler(n, batch, IID, args.seed) as sampler, GcPaused():
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


def build_parser():
    parser = argparse.ArgumentParser(
        description="Measure PyPI loaderx as the peer of the Rust loaderx benchmarks; "
                    "prints one JSON object per line on stdout.")
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("store", help="write, check and time gathers from one store")
    add_store_arguments(p)
    p.set_defaults(func=cmd_store)

    p = sub.add_parser("sampler", help="time the IID index sampler")
    p.add_argument("--n", type=positive_int, default=1_000_000)
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--seed", type=non_negative_int, required=True)
    p.add_argument("--min-seconds", type=non_negative_float, default=2.0)
    p.set_defaults(func=cmd_sampler)

    p = sub.add_parser("loader", help="time the DataLoader over built stores")
    p.add_argument("--stream", type=_parse_stream, action="append", required=True,
                   metavar="NAME=PATH")
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--workers", type=positive_int, required=True)
    p.add_argument("--prefetch", type=positive_int, required=True)
    p.add_argument("--seed", type=non_negative_int, required=True)
    p.add_argument("--warmup", type=non_negative_int, default=5)
    p.add_argument("--min-seconds", type=non_negative_float, default=3.0)
    p.set_defaults(func=cmd_loader)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return run_command(args, log)


if __name__ == "__main__":
    sys.exit(main())
