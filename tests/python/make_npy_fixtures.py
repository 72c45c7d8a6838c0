"""NumPy fixtures for `loaderx-cli/tests/convert_npy.rs`.

Usage: make_npy_fixtures.py OUT_DIR  (run with Python loaderx 2.8.19
importable, e.g. PYTHONPATH=$LOADERX_PY_RELEASES/2.8.19).

Writes, with NumPy's own writers:

* ``arrays/``: one ``.npy`` per element type a store holds, in C order
  (``c_<type>``), Fortran order (``f_<type>``) and, for multi-byte types,
  big-endian (``be_<type>``), each of shape (10, 3, 2); ``labels.npy``
  (10,) int64;
* ``stored.npz`` (``np.savez``) and ``compressed.npz``
  (``np.savez_compressed``), with a C-order, a Fortran-order and a
  big-endian member;
* ``hostile/``: a truncated file, a header claiming a huge shape, an object
  array (pickled), and ``short.npy`` of 9 records;
* ``reference/<name>``: stores written by Python loaderx 2.8.19's
  ``DenseWriter.append(np.load(...))`` for some of the arrays above.

``manifest.json`` maps every stream (``arrays/<stem>``, ``stored/<key>``,
``compressed/<key>``) to its NumPy type name, item shape and the hex of its
elements, little-endian, C order; and lists the reference stores with the
stream each must equal.
"""

import json
import os
import sys

import numpy as np

import loaderx.zrecord as zr

TYPES = [
    "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
ROWS = 10
SHAPE = (ROWS, 3, 2)


def values(name, rng):
    dt = np.dtype(name)
    if dt.kind == "b":
        return rng.integers(0, 2, SHAPE).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, SHAPE, dtype=dt, endpoint=True)
    if dt.kind == "f":
        return (rng.standard_normal(SHAPE) * 1000).astype(dt)
    real = rng.standard_normal(SHAPE) * 1000
    imag = rng.standard_normal(SHAPE) * 1000
    return (real + 1j * imag).astype(dt)


def canonical(arr):
    """Hex of the elements, little-endian, C order."""
    return arr.astype(arr.dtype.newbyteorder("<")).tobytes(order="C").hex()


def entry(arr):
    return {
        "dtype": arr.dtype.newbyteorder("=").name,
        "item_shape": list(arr.shape[1:]),
        "hex": canonical(arr),
    }


def main(out):
    rng = np.random.default_rng(0x4E50_59)
    arrays = os.path.join(out, "arrays")
    os.makedirs(arrays)
    streams = {}
    for name in TYPES:
        arr = values(name, rng)
        variants = {"c": np.ascontiguousarray(arr), "f": np.asfortranarray(arr)}
        if arr.dtype.itemsize > 1:
            big = arr.astype(arr.dtype.newbyteorder(">"))
            assert big.dtype.byteorder == ">"
            variants["be"] = big
        for prefix, a in variants.items():
            stem = f"{prefix}_{name}"
            np.save(os.path.join(arrays, f"{stem}.npy"), a)
            streams[f"arrays/{stem}"] = entry(a)
    # Fortran order is what np.save wrote for the f_ files.
    with open(os.path.join(arrays, "f_float32.npy"), "rb") as f:
        assert b"'fortran_order': True" in f.read(128)
    labels = np.arange(ROWS, dtype=np.int64) * 7 - 20
    np.save(os.path.join(arrays, "labels.npy"), labels)
    streams["arrays/labels"] = entry(labels)

    members = {
        "image": rng.integers(0, 256, (ROWS, 4, 5, 3), dtype=np.uint8),
        "weight": np.asfortranarray(rng.standard_normal((ROWS, 6, 2))),
        "target": np.arange(ROWS * 2, dtype=">i4").reshape(ROWS, 2),
        "flag": rng.integers(0, 2, ROWS).astype(bool),
    }
    np.savez(os.path.join(out, "stored.npz"), **members)
    np.savez_compressed(os.path.join(out, "compressed.npz"), **members)
    for key, a in members.items():
        streams[f"stored/{key}"] = entry(a)
        streams[f"compressed/{key}"] = entry(a)

    hostile = os.path.join(out, "hostile")
    os.makedirs(hostile)
    path = os.path.join(hostile, "truncated.npy")
    np.save(path, np.arange(ROWS * 6, dtype=np.float32).reshape(ROWS, 6))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    with open(os.path.join(hostile, "huge.npy"), "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": (1 << 40, 1 << 40)})
        f.write(b"\0" * 64)
    np.save(os.path.join(hostile, "objects.npy"),
            np.array([{"a": 1}, None, "x"] * 4, dtype=object)[:ROWS], allow_pickle=True)
    np.save(os.path.join(hostile, "short.npy"), np.zeros(ROWS - 1, dtype=np.int16))

    # Python loaderx 2.8.19's own stores of the same arrays.
    reference = os.path.join(out, "reference")
    os.makedirs(reference)
    refs = {}

    def write_reference(name, arr, stream):
        arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("=")))
        w = zr.DenseWriter(os.path.join(reference, name), arr.dtype, arr.shape[1:],
                           codec="zstd", data_shards=4)
        w.append(arr)
        w.close()
        refs[name] = stream

    for name in TYPES:
        for prefix in ("c", "f", "be"):
            path = os.path.join(arrays, f"{prefix}_{name}.npy")
            if os.path.exists(path):
                write_reference(f"{prefix}_{name}", np.load(path), f"arrays/{prefix}_{name}")
    write_reference("labels", np.load(os.path.join(arrays, "labels.npy")), "arrays/labels")
    for archive in ("stored", "compressed"):
        with np.load(os.path.join(out, f"{archive}.npz")) as z:
            for key in z.files:
                write_reference(f"{archive}_{key}", z[key], f"{archive}/{key}")

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"rows": ROWS, "streams": streams, "reference": refs}, f)


if __name__ == "__main__":
    main(sys.argv[1])
