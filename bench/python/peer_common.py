"""Shared machinery for the Python peers of loaderx-bench.

Each peer script runs under one loaderx release (``peers.py``: PyPI 2.4.6,
``peer_2_8_19.py``: 2.8.19), so nothing here may import loaderx. It holds what
does not depend on the release:

* the JSON result stream (``redirect_stdout`` / ``emit``), the exit-status
  convention (``run_command``: 0 ok, 1 ``Mismatch``, 2 any other error) and
  the argument validators, including the ``store`` subcommand's arguments
  (``add_store_arguments``), so every peer's ``store`` takes the same ones;
* the ``store`` measurement helpers: reading and warming the ``.npy`` sources
  the Rust side writes, preparing ``OUT/<codec>``, counting allocated disk
  bytes, and the timed random-gather loop;
* memory readings and the timed loader loop.

The methodology these implement is described in ``peers.py``'s docstring.
"""

import argparse
import gc
import json
import math
import os
import stat
import sys
import threading
import time
import traceback
from array import array
from collections import namedtuple
from pathlib import Path

import numpy as np

# Indices per call in the untimed full sweeps.
SWEEP_CHUNK = 4096
# Largest dense append, in bytes (and the chunk used to warm sources).
APPEND_CHUNK_BYTES = 64 << 20
# Batches drawn by the correctness check.
CHECK_BATCHES = 8
# Fewest timed gather calls, however long each one takes.
MIN_GATHER_CALLS = 3
# Codecs every peer's ``store`` accepts.
CODECS = ("raw", "zstd", "zstd_dict")
# How often the RSS monitor samples /proc/self/status.
RSS_POLL_S = 0.005


class Mismatch(Exception):
    """A gathered record differs from its source record."""


# --------------------------------------------------------------------------
# result stream and process conventions

# Result lines go to a private duplicate of the original stdout; file
# descriptor 1 itself is pointed at stderr, so nothing else (a stray print, a
# native library writing to fd 1) can end up in the JSON stream.
_RESULTS = None


def redirect_stdout():
    """Keep the original stdout for ``emit`` and send fd 1 to stderr."""
    global _RESULTS
    sys.stdout.flush()
    _RESULTS = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def emit(record):
    """Write one result as a JSON line on the result stream."""
    if _RESULTS is None:
        raise RuntimeError("emit before redirect_stdout")
    _RESULTS.write(json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n")
    _RESULTS.flush()


def run_command(args, log):
    """Run ``args.func(args)`` with the result stream set up; the exit status."""
    redirect_stdout()
    try:
        args.func(args)
    except Mismatch as exc:
        log(f"MISMATCH: {exc}")
        return 1
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return 2
    return 0


# --------------------------------------------------------------------------
# command line


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be non-negative, got {value}")
    return value


def non_negative_float(text):
    value = float(text)
    if not value >= 0.0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite non-negative number, got {text}")
    return value


def add_store_arguments(p):
    """The ``store`` subcommand's arguments (the same for every peer)."""
    p.add_argument("--kind", choices=("dense", "ragged"), required=True)
    p.add_argument("--source", required=True, help="source directory (.npy files)")
    p.add_argument("--codec", choices=CODECS, required=True)
    p.add_argument("--dict", help="zstd dictionary file (zstd_dict only)")
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--seed", type=non_negative_int, required=True)
    p.add_argument("--min-seconds", type=non_negative_float, default=2.0)
    p.add_argument("--out", required=True, help="the store is written to OUT/<codec>")
    p.add_argument("--shards", type=positive_int, default=4)


def read_dict_arg(args, log):
    """The ``--dict`` bytes for ``zstd_dict``, else None (``--dict`` is ignored)."""
    if args.codec == "zstd_dict":
        if args.dict is None:
            raise ValueError("--codec zstd_dict needs --dict FILE")
        return Path(args.dict).read_bytes()
    if args.dict is not None:
        log(f"--dict ignored for codec {args.codec}")
    return None


# --------------------------------------------------------------------------
# store helpers


class GcPaused:
    """Pause the cyclic garbage collector inside a ``with`` block."""

    def __enter__(self):
        gc.collect()
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self._was_enabled:
            gc.enable()


def bytes_equal(a, b):
    """Bitwise equality of two arrays, including shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    return np.array_equal(a, b)


def record_nbytes(result):
    """Logical bytes of a gather result (an array or a list of arrays)."""
    if isinstance(result, np.ndarray):
        return int(result.nbytes)
    return int(sum(record.nbytes for record in result))


def draw(rng, n, batch):
    """One batch of IID indices in ``0..n-1``, as uint64."""
    return rng.integers(0, n, batch, dtype=np.uint64)


def disk_bytes(path):
    """Allocated bytes (``st_blocks * 512``) of the regular files under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_blocks * 512
    return total


def touch(array_like, rows_per_chunk):
    """Read every element once so its pages are in the page cache."""
    n = len(array_like)
    for start in range(0, n, rows_per_chunk):
        np.array(array_like[start:start + rows_per_chunk], copy=True)


def rows_per(chunk_bytes, row_bytes):
    return max(1, chunk_bytes // max(1, row_bytes))


def time_gathers(gather, n, batch, rng, min_seconds, prepare=None,
                 nbytes=record_nbytes):
    """Time single ``gather(idx)`` calls until ``min_seconds`` accumulate.

    ``prepare`` (untimed) converts each drawn uint64 index array first;
    ``nbytes`` (untimed) gives the logical bytes of one result.
    Returns the gather fields of a result line.
    """
    latencies = array("d")
    total = 0.0
    logical = 0
    with GcPaused():
        while total < min_seconds or len(latencies) < MIN_GATHER_CALLS:
            idx = draw(rng, n, batch)
            if prepare is not None:
                idx = prepare(idx)
            t0 = time.perf_counter()
            out = gather(idx)
            t1 = time.perf_counter()
            dt = t1 - t0
            latencies.append(dt)
            total += dt
            logical += nbytes(out)
            del out
    calls = len(latencies)
    return {
        "gather_calls": calls,
        "gather_s": total,
        "gather_records": calls * batch,
        "gather_logical_bytes": logical,
        "p95_ms": float(np.percentile(np.frombuffer(latencies), 95)) * 1e3,
    }


def sweep_check_time(view, n, args, check, log, nbytes=record_nbytes):
    """The read half of a ``store`` measurement over an opened store (or
    view) of ``n`` records: its length, one untimed full sweep (warm page
    cache), ``check()`` (the correctness batches), then the timed gathers
    with ``default_rng(args.seed + 1)``. Returns the gather fields."""
    if len(view) != n:
        raise Mismatch(f"store holds {len(view)} records, source {n}")
    for start in range(0, n, SWEEP_CHUNK):
        view[np.arange(start, min(n, start + SWEEP_CHUNK), dtype=np.uint64)]
    check()
    log(f"checked {CHECK_BATCHES} batches of {args.batch}; timing gathers")
    rng = np.random.default_rng(args.seed + 1)
    return time_gathers(view.__getitem__, n, args.batch, rng, args.min_seconds,
                        nbytes=nbytes)


def fresh_store_path(out_dir, codec):
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


def load_dense_source(source):
    """``source/data.npy``, memory-mapped read-only."""
    data = np.load(Path(source) / "data.npy", mmap_mode="r")
    if data.ndim < 1 or len(data) == 0:
        raise ValueError(f"{Path(source) / 'data.npy'} must hold at least one record")
    return data


# A ragged source: ``flat`` (the memory-mapped 1-D flat.npy), ``shapes`` (the
# N x ndim uint64 shapes.npy, in memory), ``offsets`` (N + 1 int64 element
# offsets of the records in ``flat``) and ``records`` (record i as a view of
# ``flat``, reshaped).
RaggedSource = namedtuple("RaggedSource", "flat shapes offsets records")


def load_ragged_source(source):
    """``source/flat.npy`` + ``source/shapes.npy`` as a ``RaggedSource``."""
    source = Path(source)
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
    offsets = [0]
    offset = 0
    for shape, count in zip(shape_list, counts):
        records.append(base[offset:offset + count].reshape(shape))
        offset += count
        offsets.append(offset)
    return RaggedSource(flat, np.array(shapes), np.array(offsets, dtype=np.int64),
                        records)


# --------------------------------------------------------------------------
# memory readings and the loader loop


def proc_status_kb(field):
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(field + b":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field.decode()} line")


class RssAnonPeak(threading.Thread):
    """Track the largest ``RssAnon`` seen while running."""

    def __init__(self):
        super().__init__(name="rss-anon-peak", daemon=True)
        self.peak_kb = proc_status_kb(b"RssAnon")
        self._stop_event = threading.Event()

    def run(self):
        while not self._stop_event.wait(RSS_POLL_S):
            self.peak_kb = max(self.peak_kb, proc_status_kb(b"RssAnon"))

    def stop(self):
        self._stop_event.set()
        self.join()
        self.peak_kb = max(self.peak_kb, proc_status_kb(b"RssAnon"))
        return self.peak_kb


def time_loader(next_batch, check, warmup, min_seconds):
    """Draws `warmup` batches, then batches for at least `min_seconds`,
    `check`ing each, while tracking ``RssAnon``; returns the loader result
    fields (`batches`, `seconds`, per-second rates are the caller's)."""
    monitor = RssAnonPeak()
    monitor.start()
    try:
        for _ in range(warmup):
            check(next_batch())
        batches = 0
        t0 = time.perf_counter()
        while True:
            check(next_batch())
            batches += 1
            seconds = time.perf_counter() - t0
            if seconds >= min_seconds:
                break
        peak_kb = monitor.stop()
    finally:
        if monitor.is_alive():
            monitor.stop()
    return {
        "batches": batches,
        "seconds": seconds,
        "batches_per_s": batches / seconds,
        "peak_rss_anon_bytes": peak_kb * 1024,
        "vm_hwm_bytes": proc_status_kb(b"VmHWM") * 1024,
    }
