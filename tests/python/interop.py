#!/usr/bin/env python3
"""Zrecord interop fixtures written and read by the reference loaderx package.

The Python side (loaderx 2.4.6) of the Rust integration tests that prove
on-disk compatibility in both directions.

Subcommands:
  write OUT_DIR [--quick]     write a matrix of stores plus OUT_DIR/manifest.json
  digest STORE [STORE ...]    print "<sha256-hex>  <length>" per store
  check-empty-open STORE      print "opened <len>" or "error: <msg>" (always exit 0)
  hold STORE SECONDS          open STORE (shared lock), print "held", sleep

Canonical digest: SHA-256 over one ASCII line per record, in order,
  "<d0>,<d1>,...|<sha256-hex of the record's C-order little-endian bytes>\\n"
where d0.. is the record's shape (empty for a scalar record, giving "|<hex>\\n").
Manifest digests come from the in-memory source arrays, never from a read-back.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
from loaderx.utils import train_dict
from loaderx.zrecord import Dense, Ragged, ZrecordError

DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32",
          "uint64", "int64", "float16", "float32", "float64"]
CODECS = ["raw", "zstd", "zstd_dict"]
SHARDS = [1, 4, 7]
DENSE_SHAPES = [(), (3,), (2, 3, 2), (5,), (17, 33), (1,)]
READ_CHUNK = 4096
SEED = 0x5EED_2046


# ---------------------------------------------------------------- digests

def record_line(rec):
    """One canonical digest line for one record (ndarray or NumPy scalar)."""
    arr = np.asarray(rec)
    dims = ",".join(str(d) for d in arr.shape)
    return f"{dims}|{hashlib.sha256(arr.tobytes(order='C')).hexdigest()}\n".encode()


def digest_records(records):
    """Return (hex digest, count) over an iterable of records."""
    h, n = hashlib.sha256(), 0
    for rec in records:
        h.update(record_line(rec))
        n += 1
    return h.hexdigest(), n


# ---------------------------------------------------------------- data

def values(rng, dtype, count, low_entropy=False):
    """`count` deterministic values of `dtype`; full range unless low_entropy."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    if low_entropy:  # small values so zstd really compresses
        return rng.integers(0, 4, count).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        out = rng.integers(info.min, info.max, count, dtype=dt, endpoint=True)
        specials = np.array([info.min, info.max, 0], dtype=dt)
    else:
        # Random bit patterns hit every exponent (incl. nan payloads and
        # subnormals); then plant the named special values up front.
        bits = np.dtype(f"<u{dt.itemsize}")
        out = rng.integers(0, np.iinfo(bits).max, count, dtype=bits,
                           endpoint=True).view(dt)
        fi = np.finfo(dt)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan,
                             fi.smallest_subnormal, -fi.smallest_subnormal,
                             fi.max, fi.min, fi.tiny, -1.5], dtype=dt)
    k = min(count, len(specials))
    out[:k] = specials[:k]
    return out


def ragged_records(rng, dtype, ndim, count, max_dim, low_entropy=False):
    """`count` records of rank `ndim`, every dimension in 1..max_dim."""
    shapes = rng.integers(1, max_dim + 1, (count, ndim))
    flat = values(rng, dtype, int(shapes.prod(axis=1).sum()), low_entropy)
    out, pos = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(flat[pos:pos + size].reshape(tuple(int(d) for d in shape)))
        pos += size
    return out


def split_points(n, sizes):
    """Append-call boundaries: the given leading sizes, then the rest."""
    bounds, pos = [], 0
    for s in sizes:
        if pos + s >= n:
            break
        pos += s
        bounds.append(pos)
    return [0] + bounds + [n]


# ---------------------------------------------------------------- write

def plan(quick):
    """Yield store specs: (kind, dtype, shape|ndim, codec, shards, n, low, appends)."""
    for c, codec in enumerate(CODECS):
        for i, dtype in enumerate(DTYPES):
            shards = SHARDS[i % 3]  # every shard count meets every codec
            n = 40 + 23 * i + 7 * c
            yield ("dense", dtype, DENSE_SHAPES[(i + c) % len(DENSE_SHAPES)],
                   codec, shards, n, False, [1, 5])
            yield ("ragged", dtype, 1 + i % 3, codec, SHARDS[(i + 1) % 3],
                   n, False, [3, 20])  # every rank meets every codec
        # Compressible data, so the zstd paths carry real compressed frames.
        yield ("dense", "int32", (64,), codec, 4, 300, True, [100])
        yield ("ragged", "uint8", 2, codec, 7, 300, True, [100])
        # Single-record stores.
        yield ("dense", "float64", (2, 2), codec, 7, 1, False, [])
        yield ("ragged", "int16", 3, codec, 1, 1, False, [])
    if not quick:  # > 32768 records, appended across several windows
        yield ("dense", "uint16", (4,), "zstd", 7, 40000, False, [1, 33000])
        yield ("ragged", "int32", 2, "zstd_dict", 4, 40000, True, [1, 33000])
        yield ("ragged", "float32", 1, "raw", 1, 40000, False, [7, 32768])


def make_dict(data, dtype):
    """Train on the store's own records; tiny records (e.g. a few bool bytes)
    are too small for zstd's trainer, so fall back to a same-dtype corpus."""
    try:
        return train_dict(data)
    except ZrecordError:
        corpus = values(np.random.default_rng(SEED + 1), dtype, 256 * 64)
        return train_dict(corpus.reshape(256, 64))


def write_store(root, index, spec, rng):
    kind, dtype, geom, codec, shards, n, low, appends = spec
    if kind == "dense":
        label = "x".join(map(str, geom)) or "scalar"
    else:
        label = f"nd{geom}"
    name = f"{index:03d}_{kind}_{dtype}_{label}_{codec}_s{shards}_n{n}"
    if kind == "dense":
        data = values(rng, dtype, n * int(np.prod(geom, dtype=np.int64)), low)
        data = data.reshape((n, *geom))
    else:
        max_dim = 4 if geom >= 2 and n > 1000 else 9 - 2 * geom
        data = ragged_records(rng, dtype, geom, n, max_dim, low)
    opts = {"codec": codec, "data_shards": shards}
    if codec == "zstd_dict":
        opts["dict_bytes"] = make_dict(data, dtype)
    if kind == "dense":
        store = Dense.create(os.path.join(root, name), dtype, geom, **opts)
    else:
        store = Ragged.create(os.path.join(root, name), dtype, geom, **opts)
    bounds = split_points(n, appends)
    for lo, hi in zip(bounds, bounds[1:]):
        store.append(data[lo:hi])
    store.close()
    digest, length = digest_records(data)
    return {"name": name, "kind": kind, "dtype": np.dtype(dtype).str,
            "codec": codec, "data_shards": shards,
            "shape": list(geom) if kind == "dense" else None,
            "ndim": len(geom) if kind == "dense" else geom,
            "length": length, "digest": digest}


def cmd_write(args):
    os.makedirs(args.out_dir)  # must not exist yet
    rng = np.random.default_rng(SEED)
    manifest = [write_store(args.out_dir, i, spec, rng)
                for i, spec in enumerate(plan(args.quick))]
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


# ---------------------------------------------------------------- read side

def open_any(path):
    """Open as Dense, falling back to Ragged when the schema is not dense."""
    try:
        return Dense.open(path)
    except ValueError as dense_err:  # schema mismatch; native errors pass through
        try:
            return Ragged.open(path)
        except Exception as ragged_err:
            raise RuntimeError(f"dense: {dense_err}; ragged: {ragged_err}") from None


def iter_store(store):
    for start in range(0, len(store), READ_CHUNK):
        yield from store[start:min(start + READ_CHUNK, len(store))]


def cmd_digest(args):
    """Stores that fail are reported on stderr (no stdout line) and make the
    exit status 1; the remaining stores are still digested."""
    rc = 0
    for path in args.stores:
        try:
            store = open_any(path)
            try:
                digest, length = digest_records(iter_store(store))
                if length != len(store):
                    raise RuntimeError(f"read {length} records, len() says {len(store)}")
            finally:
                store.close()
        except Exception as e:
            print(f"{path}: {type(e).__name__}: {e}", file=sys.stderr)
            rc = 1
            continue
        print(f"{digest}  {length}", flush=True)
    return rc


def cmd_check_empty_open(args):
    try:
        store = open_any(args.store)
        print(f"opened {len(store)}")
        store.close()
    except Exception as e:
        print(f"error: {e}")
    return 0


def cmd_hold(args):
    store = open_any(args.store)
    print("held", flush=True)
    time.sleep(args.seconds)
    store.close()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write the store matrix and manifest.json")
    w.add_argument("out_dir")
    w.add_argument("--quick", action="store_true", help="skip >32768-record stores")
    w.set_defaults(func=cmd_write)
    d = sub.add_parser("digest", help="print '<sha256>  <length>' per store")
    d.add_argument("stores", nargs="+")
    d.set_defaults(func=cmd_digest)
    e = sub.add_parser("check-empty-open", help="report how opening STORE goes")
    e.add_argument("store")
    e.set_defaults(func=cmd_check_empty_open)
    h = sub.add_parser("hold", help="hold STORE open for SECONDS")
    h.add_argument("store")
    h.add_argument("seconds", type=float)
    h.set_defaults(func=cmd_hold)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
