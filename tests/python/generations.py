#!/usr/bin/env python3
"""Zrecord fixtures written and read by any of four Python loaderx releases.

The Python side of the Rust format-generation tests
(tests/interop_generations.rs). One script runs under loaderx 2.4.6, 2.8.12,
2.8.18 and 2.8.19 -- one release per format generation -- and adapts to each
release's API:

* 2.4.6: ``Dense.create`` / ``Ragged.create`` / ``.open``, numpy in and out,
  ``loaderx.utils.train_dict`` on arrays;
* 2.8.x: ``DenseWriter`` / ``RaggedWriter`` (``RaggedBatch.from_records``),
  ``DenseStore`` / ``RaggedStore`` bound to ``Allocator('cpu')``, DLPack out,
  ``loaderx.zrecord.train_dict`` on a bound view.

Subcommands:
  write OUT_DIR [--quick]   write a store matrix plus OUT_DIR/manifest.json
  digest STORE [STORE ...]  print "<sha256-hex>  <length>" per store; a store
                            that fails prints "<path>: <Type>: <msg>" on stderr
                            and makes the exit status 1 (the rest still run)
  probe                     print which catalogue dtypes the release round-trips

manifest.json is an object:
  {"release": "2.8.19", "stores": [{name, kind, dtype, codec, data_shards,
   shape, ndim, length, digest, generation, appends}, ...],
   "skipped": [{"dtype": ..., "reason": ...}, ...]}
where dtype is the NumPy dtype *name* ("bfloat16", "int32"), shape is the
Dense item shape (null for Ragged), generation the writing release's version.

Canonical digest (the same as interop.py and loaderx_core::DigestBuilder):
SHA-256 over one ASCII line per record, in order,
  "<d0>,<d1>,...|<sha256-hex of the record's C-order little-endian bytes>\\n"
(empty dims for a scalar record). Manifest digests come from the in-memory
source arrays, never from a read-back.
"""

import argparse
import ctypes
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile

import numpy as np

import loaderx.zrecord as zr

RELEASE = importlib.metadata.version("loaderx")
CLASSIC = hasattr(zr, "Dense")  # 2.4.6: Dense/Ragged; 2.8.x: *Writer/*Store

if CLASSIC:
    from loaderx.utils import train_dict as _train_dict_classic
else:
    from loaderx import Allocator
    from loaderx._dlpack import DLTensor, kDLCPU

# The 20-type catalogue of loaderx 2.8.19 (loaderx.dtypes), in its order.
CATALOGUE = [
    "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "float8_e8m0fnu",
    "complex64", "complex128",
]
CODECS = ["raw", "zstd", "zstd_dict"]
SHARDS = [1, 4, 7]
DENSE_SHAPES = [(), (3,), (2, 3, 2), (17, 5), (5,), (4, 4, 1)]
READ_CHUNK = 4096
TRAIN_RECORDS = 2000
SEED = 0x6E4E_2819

# (exponent bits, mantissa bits) of the IEEE-like float types
FLOAT_LAYOUT = {"float16": (5, 10), "bfloat16": (8, 7),
                "float32": (8, 23), "float64": (11, 52)}


# ---------------------------------------------------------------- digests

def record_line(shape, data):
    """One canonical digest line: the record's dims and its bytes' SHA-256."""
    dims = ",".join(str(int(d)) for d in shape)
    return f"{dims}|{hashlib.sha256(data).hexdigest()}\n".encode()


def digest_pairs(pairs):
    """(hex digest, count) over an iterable of (shape, bytes) records."""
    h, n = hashlib.sha256(), 0
    for shape, data in pairs:
        h.update(record_line(shape, data))
        n += 1
    return h.hexdigest(), n


def digest_arrays(records):
    """(hex digest, count) over in-memory ndarrays (or one stacked array)."""
    return digest_pairs((r.shape, np.ascontiguousarray(r).tobytes()) for r in records)


# ---------------------------------------------------------------- dtypes

def lookup_dtype(name):
    """The NumPy dtype called `name` (ml_dtypes for bfloat16 / float8)."""
    if hasattr(np, name) and name not in ("bool",):
        return np.dtype(getattr(np, name))
    if name == "bool":
        return np.dtype(np.bool_)
    # Imported only when asked for: importing ml_dtypes registers its names
    # with NumPy, after which even 2.4.6 opens a "bfloat16" schema, and
    # `digest` should read the way a plain 2.4.6 install does.
    import ml_dtypes  # pylint: disable=import-outside-toplevel
    if not hasattr(ml_dtypes, name):
        raise TypeError(f"ml_dtypes has no {name}")
    return np.dtype(getattr(ml_dtypes, name))


def is_extension(dt):
    return dt.type.__module__.startswith("ml_dtypes")


def float_specials(name):
    """Bit patterns of the special values of an IEEE-like float type: +-0,
    +-inf, quiet / signalling / payload NaNs of both signs, the smallest and
    largest subnormals, the smallest normal, +-max, 1.0 and -1.5."""
    e, m = FLOAT_LAYOUT[name]
    sign = 1 << (e + m)
    exp_all = ((1 << e) - 1) << m
    quiet = 1 << (m - 1)
    one = ((1 << (e - 1)) - 1) << m
    pos = [0, exp_all, exp_all | quiet, exp_all | quiet | 1, exp_all | 1,
           exp_all | ((1 << m) - 1), 1, (1 << m) - 1, 1 << m,
           exp_all - 1, one, one | quiet]
    return pos + [p | sign for p in pos]


def specials(dt):
    """The values to plant at the front of a random array of `dt`."""
    name = dt.name
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([info.min, info.max, 0, 1], dtype=dt)
    if name in FLOAT_LAYOUT:
        bits = np.dtype(f"<u{dt.itemsize}")
        return np.array(float_specials(name), dtype=bits).view(dt)
    if dt.kind == "c":
        half = "float32" if dt.itemsize == 8 else "float64"
        s = float_specials(half)
        pairs = [v for i in range(len(s)) for v in (s[i], s[-1 - i])]
        return np.array(pairs, dtype=np.dtype(f"<u{dt.itemsize // 2}")).view(dt)
    if dt.itemsize == 1 and dt.kind != "b":  # float8: every code, shuffled
        return np.random.default_rng(SEED + 8).permutation(256).astype(np.uint8).view(dt)
    return np.array([], dtype=dt)


def values(rng, dt, count, low_entropy=False):
    """`count` deterministic elements of `dt`: random bit patterns (every
    exponent, NaN payloads, subnormals) with the specials planted up front;
    small byte values when low_entropy, so zstd really compresses."""
    if dt.kind == "b":
        return rng.integers(0, 2, count).astype(np.bool_)
    nbytes = count * dt.itemsize
    if low_entropy:
        raw = rng.integers(0, 4, nbytes, dtype=np.uint8)
        return raw.view(dt).copy()
    out = rng.integers(0, 256, nbytes, dtype=np.uint8).view(dt).copy()
    sp = specials(dt)
    k = min(count, len(sp))
    out[:k] = sp[:k]
    return out


def all_codes(dt):
    """Every bit pattern of a 1- or 2-byte type, in code order."""
    bits = np.dtype(f"<u{dt.itemsize}")
    return np.arange(1 << (8 * dt.itemsize), dtype=np.uint64).astype(bits).view(dt)


# ---------------------------------------------------------------- release adapters

def _dense_input(arr):
    """What a 2.8.x DenseWriter.append takes for `arr`: NumPy exports the
    classic dtypes by DLPack itself; ml_dtypes arrays (bfloat16, float8) are
    neither DLPack-exportable nor buffer-viewable by NumPy 2.4, so wrap them in
    loaderx's own DLTensor, which knows their DLPack codes."""
    arr = np.ascontiguousarray(arr)
    if is_extension(arr.dtype):
        return DLTensor(arr, arr, kDLCPU, 0)
    return arr


class Writer:
    """create / append / close across the two API families."""

    def __init__(self, path, kind, dt, geom, codec, shards, dict_bytes):
        opts = {"codec": codec, "data_shards": shards}
        if codec == "zstd_dict":
            opts["dict_bytes"] = dict_bytes
        self.kind = kind
        if CLASSIC:
            cls = zr.Dense if kind == "dense" else zr.Ragged
            self.w = cls.create(path, dt, geom, **opts)
        elif kind == "dense":
            self.w = zr.DenseWriter(path, dt, geom, **opts)
        else:
            self.w = zr.RaggedWriter(path, dt, ndim=geom, **opts)

    def append(self, chunk):
        """Append a stacked dense array, or a list of ragged records."""
        if CLASSIC:
            self.w.append(chunk)
        elif self.kind == "dense":
            self.w.append(_dense_input(chunk))
        else:
            self.w.append(zr.RaggedBatch.from_records(list(chunk)))

    def close(self):
        self.w.close()


def _tensor_bytes(t):
    """The bytes of a CPU DLTensor: through NumPy's DLPack import, or -- for
    bfloat16 / float8, which NumPy 2.4 cannot import -- from its CPU address."""
    try:
        return np.from_dlpack(t).tobytes()
    except (RuntimeError, BufferError, TypeError):
        if t.nbytes == 0:
            return b""
        return ctypes.string_at(t._cpu_pointer(), t.nbytes)


class Reader:
    """open / len / iterate (shape, bytes) across the two API families."""

    def __init__(self, path):
        self.kind, self.s = self._open(path)
        self.dtype = np.dtype(self.s.dtype)

    @staticmethod
    def _open(path):
        if CLASSIC:
            dense, ragged = zr.Dense.open, zr.Ragged.open
        else:
            dense, ragged = zr.DenseStore, zr.RaggedStore
        try:
            return "dense", dense(path)
        except ValueError as dense_err:  # schema mismatch; native errors pass
            try:
                return "ragged", ragged(path)
            except Exception as ragged_err:
                raise RuntimeError(
                    f"dense: {dense_err}; ragged: {type(ragged_err).__name__}: {ragged_err}"
                ) from None

    def __len__(self):
        return len(self.s)

    def records(self):
        n = len(self.s)
        if CLASSIC:
            for lo in range(0, n, READ_CHUNK):
                for rec in self.s[lo:min(lo + READ_CHUNK, n)]:
                    rec = np.asarray(rec)
                    yield rec.shape, np.ascontiguousarray(rec).tobytes()
            return
        isz = self.dtype.itemsize
        with Allocator("cpu") as alloc:
            view = self.s.bind(alloc)
            for lo in range(0, n, READ_CHUNK):
                hi = min(lo + READ_CHUNK, n)
                got = view[lo:hi]
                if self.kind == "dense":
                    shape = tuple(self.s.item_shape)
                    data = _tensor_bytes(got)
                    row = len(data) // (hi - lo)
                    for i in range(hi - lo):
                        yield shape, data[i * row:(i + 1) * row]
                else:
                    shapes = np.from_dlpack(got.shapes)
                    cu = np.from_dlpack(got.cu_seqlens)
                    data = _tensor_bytes(got.values)
                    for i in range(hi - lo):
                        yield (tuple(int(d) for d in shapes[i]),
                               data[int(cu[i]) * isz:int(cu[i + 1]) * isz])
                del got
            del view

    def close(self):
        self.s.close()


def train(records, dt, scratch):
    """A zstd dictionary trained by the release on `records` (a stacked dense
    array or a list of ragged records); tiny records are too small for zstd's
    trainer, so fall back to a same-dtype corpus of 64-element rows."""
    def attempt(recs, kind):
        if CLASSIC:
            return _train_dict_classic(recs)
        # 2.8.x trains only from a bound view: write a scratch store first.
        path = tempfile.mkdtemp(dir=scratch)
        shutil.rmtree(path)
        geom = recs.shape[1:] if kind == "dense" else recs[0].ndim
        w = Writer(path, kind, dt, geom, "raw", 1, None)
        w.append(recs)
        w.close()
        try:
            store = zr.DenseStore(path) if kind == "dense" else zr.RaggedStore(path)
            with store, Allocator("cpu") as alloc:
                return zr.train_dict(store.bind(alloc))
        finally:
            shutil.rmtree(path, ignore_errors=True)

    kind = "dense" if isinstance(records, np.ndarray) else "ragged"
    records = records[:TRAIN_RECORDS]  # a sample trains as well, and faster
    if not CLASSIC and is_extension(dt):
        # 2.8.x train_dict reads its sample back through np.from_dlpack, which
        # NumPy 2.4 refuses for bfloat16 / float8 ("Unsupported dtype in
        # DLTensor"); the trainer only sees bytes, so train on a uint8 view.
        dt = np.dtype(np.uint8)
        if kind == "dense":
            records = np.ascontiguousarray(records).reshape(len(records), -1).view(dt)
        else:
            records = [np.ascontiguousarray(r).reshape(-1).view(dt) for r in records]
    try:
        return attempt(records, kind)
    except (zr.ZrecordError, ValueError):
        corpus = values(np.random.default_rng(SEED + 1), dt, 256 * 64)
        return attempt(corpus.reshape(256, 64), "dense")


# ---------------------------------------------------------------- probe

def probe(scratch):
    """(accepted dtype names, [{dtype, reason}]) for the whole catalogue:
    a dtype is accepted when a Dense and a Ragged store of it write, reopen
    with the same dtype name and read back the same bytes."""
    accepted, skipped = [], []
    rng = np.random.default_rng(SEED + 2)
    for name in CATALOGUE:
        stage = "dtype"
        try:
            dt = lookup_dtype(name)
            for kind in ("dense", "ragged"):
                path = os.path.join(scratch, f"probe_{name}_{kind}")
                data = values(rng, dt, 6).reshape(3, 2)
                stage = f"{kind} write"
                w = Writer(path, kind, dt, (2,) if kind == "dense" else 1, "raw", 1, None)
                w.append(data if kind == "dense" else list(data))
                w.close()
                stage = f"{kind} read"
                r = Reader(path)
                try:
                    if r.dtype.name != name:
                        raise TypeError(f"reopens as {r.dtype.name} ({r.dtype.str!r})")
                    got = list(r.records())
                finally:
                    r.close()
                if digest_pairs(got) != digest_arrays(data):
                    raise ValueError("read back different bytes")
            accepted.append(name)
        except Exception as e:  # the reason is the finding
            skipped.append({"dtype": name, "reason": f"{stage}: {type(e).__name__}: {e}"})
    return accepted, skipped


# ---------------------------------------------------------------- write

def plan(dtypes, quick):
    """Store specs: dict(kind, dtype, geom, codec, shards, n, low, appends, tag)."""
    specs = []

    def add(kind, dtype, geom, codec, shards, n, appends=(), low=False, tag="", data=None):
        specs.append(dict(kind=kind, dtype=dtype, geom=geom, codec=codec, shards=shards,
                          n=n, appends=list(appends), low=low, tag=tag, data=data))

    # Every dtype, Dense and Ragged; the rotations give every codec every
    # Dense rank, every Ragged ndim and every shard count.
    for i, dtype in enumerate(dtypes):
        c = (i + i // 3) % 3
        add("dense", dtype, DENSE_SHAPES[i % len(DENSE_SHAPES)], CODECS[c],
            SHARDS[(i // 2) % 3], 30 + 7 * i, [1, 5])
        add("ragged", dtype, 1 + i % 3, CODECS[(c + 1) % 3], SHARDS[(i + 1) % 3],
            25 + 5 * i, [3, 10])
    for codec in CODECS:
        # Compressible data, so the zstd paths carry real compressed frames.
        add("dense", "int32", (64,), codec, 4, 300, [100], low=True)
        add("ragged", "uint8", 2, codec, 7, 300, [100], low=True)
        # Empty stores (no append at all) of each kind.
        add("dense", "float32", (3,), codec, 4, 0)
        add("ragged", "int64", 2, codec, 1, 0)
    # Single-record stores.
    add("dense", "float64", (2, 2), "zstd", 7, 1)
    add("ragged", "int16", 3, "raw", 1, 1)
    # 255 shards: more records than shards, several appends.
    add("dense", "uint32", (2,), "zstd", 255, 600, [1, 254, 100])
    add("ragged", "uint16", 1, "zstd_dict", 255, 600, [255, 1])
    add("dense", "int8", (), "raw", 255, 300, [10])
    # Special float bit patterns: every code of the 1- and 2-byte floats,
    # the planted specials (and random bits) of the wider ones.
    floats = [d for d in dtypes if d in FLOAT_LAYOUT or d.startswith(("float8", "complex"))]
    for j, dtype in enumerate(floats):
        dt = lookup_dtype(dtype)
        codec = CODECS[j % 3]
        if dt.itemsize <= 2:
            codes = all_codes(dt)
            width = 256
            add("dense", dtype, (width,), codec, SHARDS[j % 3], len(codes) // width,
                [len(codes) // width // 2], tag="allcodes",
                data=codes.reshape(-1, width))
        else:
            add("dense", dtype, (8,), codec, SHARDS[j % 3], 40, [1], tag="specials")
            add("ragged", dtype, 1, CODECS[(j + 1) % 3], SHARDS[(j + 2) % 3], 12, [1],
                tag="specials")
    if not quick:  # > 32768 records, appended across several calls
        add("dense", "uint16", (4,), "zstd", 7, 40000, [1, 33000])
        add("ragged", "int32", 2, "zstd_dict", 4, 40000, [1, 33000], low=True)
        add("ragged", "float32", 1, "raw", 1, 40000, [7, 32768])
    return specs


def split_points(n, sizes):
    """Append-call boundaries: the given leading sizes, then the rest."""
    bounds, pos = [0], 0
    for s in sizes:
        if s <= 0:
            continue
        if pos + s >= n:
            break
        pos += s
        bounds.append(pos)
    if n:
        bounds.append(n)
    return bounds


def ragged_records(rng, dt, ndim, count, max_dim, low):
    """`count` records of rank `ndim`, every dimension in 1..max_dim."""
    shapes = rng.integers(1, max_dim + 1, (count, ndim))
    sizes = shapes.prod(axis=1)
    flat = values(rng, dt, int(sizes.sum()), low)
    pieces = np.split(flat, np.cumsum(sizes)[:-1])
    return [p.reshape(tuple(shape)) for p, shape in zip(pieces, shapes.tolist())]


def write_store(root, scratch, index, spec, rng):
    kind, dtype, geom, n = spec["kind"], spec["dtype"], spec["geom"], spec["n"]
    codec, shards = spec["codec"], spec["shards"]
    dt = lookup_dtype(dtype)
    label = ("x".join(map(str, geom)) or "scalar") if kind == "dense" else f"nd{geom}"
    tag = f"_{spec['tag']}" if spec["tag"] else ""
    name = f"{index:03d}_{kind}_{dtype}_{label}_{codec}_s{shards}_n{n}{tag}"
    if spec["data"] is not None:
        data = spec["data"]
    elif kind == "dense":
        size = n * int(np.prod(geom, dtype=np.int64))
        data = values(rng, dt, size, spec["low"]).reshape((n, *geom))
    else:
        max_dim = 4 if geom >= 2 and n > 1000 else 9 - 2 * geom
        data = ragged_records(rng, dt, geom, n, max_dim, spec["low"])
    dict_bytes = None
    if codec == "zstd_dict":
        dict_bytes = train(data if n else values(rng, dt, 64 * 256).reshape(256, 64),
                           dt, scratch)
    w = Writer(os.path.join(root, name), kind, dt, geom, codec, shards, dict_bytes)
    bounds = split_points(n, spec["appends"])
    for lo, hi in zip(bounds, bounds[1:]):
        w.append(data[lo:hi])
    w.close()
    digest, length = digest_arrays(data)
    assert length == n
    return {"name": name, "kind": kind, "dtype": dt.name, "codec": codec,
            "data_shards": shards,
            "shape": list(geom) if kind == "dense" else None,
            "ndim": len(geom) if kind == "dense" else geom,
            "length": length, "digest": digest, "generation": RELEASE,
            "appends": max(len(bounds) - 1, 0)}


def cmd_write(args):
    os.makedirs(args.out_dir)  # must not exist yet
    scratch = tempfile.mkdtemp(prefix="lx-gen-scratch-")
    try:
        accepted, skipped = probe(scratch)
        rng = np.random.default_rng(SEED)
        stores = [write_store(args.out_dir, scratch, i, spec, rng)
                  for i, spec in enumerate(plan(accepted, args.quick))]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    manifest = {"release": RELEASE, "stores": stores, "skipped": skipped}
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


# ---------------------------------------------------------------- read side

def cmd_digest(args):
    """Stores that fail are reported on stderr (no stdout line) and make the
    exit status 1; the remaining stores are still digested."""
    rc = 0
    for path in args.stores:
        try:
            r = Reader(path)
            try:
                digest, length = digest_pairs(r.records())
                if length != len(r):
                    raise RuntimeError(f"read {length} records, len() says {len(r)}")
            finally:
                r.close()
        except Exception as e:
            print(f"{path}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            rc = 1
            continue
        print(f"{digest}  {length}", flush=True)
    return rc


def cmd_packed(args):
    """For each `STORE=I,J,...`: the release's packed read of those records
    (its `RaggedBatch`), as OUT_DIR/<k>.values, <k>.cu_seqlens and <k>.shapes
    (raw bytes), k counting from 0."""
    if CLASSIC:
        raise SystemExit(f"loaderx {RELEASE} has no packed RaggedBatch")
    with Allocator("cpu") as alloc:
        for k, spec in enumerate(args.reads):
            path, _, indices = spec.rpartition("=")
            idx = tuple(int(i) for i in indices.split(","))
            with zr.RaggedStore(path) as store:
                view = store.bind(alloc)
                got = view[idx]
                for field in ("values", "cu_seqlens", "shapes"):
                    with open(os.path.join(args.out_dir, f"{k}.{field}"), "wb") as f:
                        f.write(_tensor_bytes(getattr(got, field)))
                del got, view
    return 0


def cmd_probe(_args):
    scratch = tempfile.mkdtemp(prefix="lx-gen-probe-")
    try:
        accepted, skipped = probe(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"release": RELEASE, "accepted": accepted, "skipped": skipped},
                     indent=1))
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
    pk = sub.add_parser("packed", help="dump packed reads: OUT_DIR STORE=I,J,...")
    pk.add_argument("out_dir")
    pk.add_argument("reads", nargs="+")
    pk.set_defaults(func=cmd_packed)
    pr = sub.add_parser("probe", help="which catalogue dtypes round-trip")
    pr.set_defaults(func=cmd_probe)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
