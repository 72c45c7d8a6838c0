"""Local Arrow-backed fixtures for `loaderx convert parquet|arrow` (loaderx-cli/tests/convert_local.rs).

    PYTHONPATH=<loaderx 2.8.19 --target folder> python make_local_fixtures.py OUT

Every file is written by its real producer: pyarrow (parquet, Arrow IPC
file and stream), `datasets` (`save_to_disk` of a Dataset and of a
DatasetDict, with Image, Audio, ClassLabel, string and sequence features),
Pillow (PNG), soundfile (WAV), and Python loaderx 2.8.19's own converter
(`loaderx.converter.convert`) for the digest comparison. OUT receives:

- `table.parquet`, `table.arrow` (IPC file), `table.arrows` (IPC stream):
  one pyarrow table of numbers, fixed-size and variable lists, nested
  lists, 2.8.19's `struct{values, shape}` Ragged contract and strings;
- `saved_dict/`: a DatasetDict (train, test) saved to disk in shards;
- `saved_numeric/`: a numeric Dataset saved to disk in two shards, and
  `py2819/`: what loaderx 2.8.19's `convert` wrote from the same Dataset;
- `expected.json`: per case, per split and store, the kind, dtype, shape
  or rank, record count and canonical digest, computed with numpy from the
  source data.
"""

import hashlib
import io
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf
from PIL import Image

import datasets

datasets.disable_progress_bars()

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(20261204)
expected = {}

DTYPES = {
    np.dtype(np.bool_): "bool", np.dtype(np.uint8): "u8", np.dtype(np.int8): "i8",
    np.dtype(np.uint16): "u16", np.dtype(np.int16): "i16", np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32", np.dtype(np.uint64): "u64", np.dtype(np.int64): "i64",
    np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}


def digest(records):
    """Canonical digest of numpy records (C order, little-endian)."""
    outer = hashlib.sha256()
    n = 0
    for a in records:
        a = np.array(a, order="C")
        shape = ",".join(str(d) for d in a.shape)
        outer.update(f"{shape}|{hashlib.sha256(a.tobytes()).hexdigest()}\n".encode())
        n += 1
    return outer.hexdigest(), n


def column(records, kind, dtype, shape=None, ndim=None):
    d, n = digest(records)
    entry = {"kind": kind, "dtype": DTYPES[np.dtype(dtype)], "records": n, "digest": d}
    if kind == "dense":
        entry["shape"] = list(shape)
    else:
        entry["ndim"] = ndim
    return entry


# --- A. One pyarrow table: parquet, IPC file, IPC stream.
n = 50
i64 = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
f32 = rng.standard_normal(n).astype(np.float32)
f16 = rng.standard_normal(n).astype(np.float16)
flag = rng.integers(0, 2, size=n).astype(bool)
fixed = rng.integers(-(2**15), 2**15, size=(n, 3)).astype(np.int16)
seq = [rng.integers(-(2**31), 2**31, size=int(k), dtype=np.int64).astype(np.int32)
       for k in rng.integers(1, 9, size=n)]
nested = [rng.standard_normal((int(k), 2)) for k in rng.integers(1, 5, size=n)]
shaped = [rng.standard_normal((int(a), int(b))).astype(np.float32)
          for a, b in zip(rng.integers(1, 4, size=n), rng.integers(1, 5, size=n))]
words = ["alpha", "βeta", "gamma delta", "ε", "zeta eta theta"]
text = [words[i % len(words)] * (1 + i % 3) for i in range(n)]
shaped_type = pa.struct([("values", pa.list_(pa.float32())), ("shape", pa.list_(pa.uint32(), 2))])
table = pa.table({
    "i64": pa.array(i64),
    "f32": pa.array(f32),
    "f16": pa.array(f16),
    "flag": pa.array(flag),
    "fixed": pa.array(fixed.tolist(), type=pa.list_(pa.int16(), 3)),
    "seq": pa.array(seq, type=pa.list_(pa.int32())),
    "nested": pa.array([m.tolist() for m in nested], type=pa.list_(pa.list_(pa.float64()))),
    "shaped": pa.array([{"values": s.ravel().tolist(), "shape": list(s.shape)} for s in shaped],
                       type=shaped_type),
    "text": pa.array(text),
})
pq.write_table(table, os.path.join(OUT, "table.parquet"), row_group_size=7)
with pa.ipc.new_file(os.path.join(OUT, "table.arrow"), table.schema) as w:
    for b in table.to_batches(max_chunksize=16):
        w.write_batch(b)
with pa.ipc.new_stream(os.path.join(OUT, "table.arrows"), table.schema) as w:
    for b in table.to_batches(max_chunksize=16):
        w.write_batch(b)
expected["table"] = {"train": {"records": n, "columns": {
    "i64": column(list(i64), "dense", np.int64, shape=()),
    "f32": column(list(f32), "dense", np.float32, shape=()),
    "f16": column(list(f16), "dense", np.float16, shape=()),
    "flag": column(list(flag), "dense", np.bool_, shape=()),
    "fixed": column(list(fixed), "dense", np.int16, shape=(3,)),
    "seq": column(seq, "ragged", np.int32, ndim=1),
    "nested": column(nested, "ragged", np.float64, ndim=2),
    "shaped": column(shaped, "ragged", np.float32, ndim=2),
    "text": column([np.frombuffer(t.encode(), dtype=np.uint8) for t in text], "ragged", np.uint8, ndim=1),
}}}


# --- B. A DatasetDict with images, audio, labels, text and tokens, saved
# to disk in several shards.
def png(array):
    buf = io.BytesIO()
    Image.fromarray(array, "RGB").save(buf, format="PNG")
    return buf.getvalue()


def wav(frames, rate):
    t = np.arange(frames) / rate
    buf = io.BytesIO()
    sf.write(buf, 0.5 * np.sin(2 * np.pi * 440 * t), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


features = datasets.Features({
    "image": datasets.Image(),
    "audio": datasets.Audio(),
    "label": datasets.ClassLabel(names=["cat", "dog", "emu"]),
    "text": datasets.Value("string"),
    "tokens": datasets.Sequence(datasets.Value("int32")),
})
splits = {}
saved_expect = {}
for split, count in [("train", 30), ("test", 9)]:
    images = [rng.integers(0, 256, size=(int(h), int(w), 3), dtype=np.uint8)
              for h, w in zip(rng.integers(3, 20, size=count), rng.integers(3, 20, size=count))]
    clips = [wav(int(f), 8000) for f in rng.integers(50, 400, size=count)]
    labels = rng.integers(0, 3, size=count).astype(np.int64)
    texts = [f"{split} row {i} " + "x" * int(i % 5) for i in range(count)]
    tokens = [rng.integers(0, 1000, size=int(k)).astype(np.int32) for k in rng.integers(1, 6, size=count)]
    # Built as Arrow and cast (encoding Audio examples would need torchcodec).
    file_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    ds = datasets.Dataset(pa.table({
        "image": pa.array([{"bytes": png(a), "path": None} for a in images], type=file_type),
        "audio": pa.array([{"bytes": c, "path": None} for c in clips], type=file_type),
        "label": pa.array(labels),
        "text": pa.array(texts),
        "tokens": pa.array([t.tolist() for t in tokens], type=pa.list_(pa.int32())),
    })).cast(features)
    splits[split] = ds
    samples = [sf.read(io.BytesIO(c), dtype="float32")[0] for c in clips]
    saved_expect[split] = {"records": count, "columns": {
        "image": column(images, "ragged", np.uint8, ndim=3),
        "audio": column(samples, "ragged", np.float32, ndim=1),
        "audio.sampling_rate": column([np.uint32(8000)] * count, "dense", np.uint32, shape=()),
        "label": column(list(labels), "dense", np.int64, shape=()),
        "text": column([np.frombuffer(t.encode(), dtype=np.uint8) for t in texts], "ragged", np.uint8, ndim=1),
        "tokens": column(tokens, "ragged", np.int32, ndim=1),
    }}
datasets.DatasetDict(splits).save_to_disk(os.path.join(OUT, "saved_dict"), num_shards={"train": 3, "test": 1})
expected["saved_dict"] = saved_expect
# The image files' own bytes, for --encoded.
expected["saved_dict_encoded"] = {
    split: column([np.frombuffer(r["bytes"], dtype=np.uint8)
                   for r in ds.data.column("image").to_pylist()], "ragged", np.uint8, ndim=1)
    for split, ds in splits.items()
}

# --- C. A numeric Dataset (what 2.8.19's converter takes), saved to disk
# and converted by loaderx 2.8.19.
m = 40
num_features = datasets.Features({
    "label": datasets.ClassLabel(names=["a", "b", "c", "d"]),
    "x": datasets.Value("float64"),
    "fixed": datasets.Sequence(datasets.Value("float32"), length=4),
    "tokens": datasets.Sequence(datasets.Value("int32")),
    "shaped": {"values": datasets.Sequence(datasets.Value("uint16")),
               "shape": datasets.Sequence(datasets.Value("uint32"), length=3)},
})
vols = [rng.integers(0, 2**16, size=(int(a), 2, int(b))).astype(np.uint16)
        for a, b in zip(rng.integers(1, 4, size=m), rng.integers(1, 4, size=m))]
numeric = datasets.Dataset.from_dict({
    "label": rng.integers(0, 4, size=m).tolist(),
    "x": rng.standard_normal(m).tolist(),
    "fixed": rng.standard_normal((m, 4)).astype(np.float32).tolist(),
    "tokens": [rng.integers(0, 50000, size=int(k)).tolist() for k in rng.integers(1, 12, size=m)],
    "shaped": [{"values": v.ravel().tolist(), "shape": list(v.shape)} for v in vols],
}, features=num_features)
numeric.save_to_disk(os.path.join(OUT, "saved_numeric"), num_shards=2)
from loaderx.converter import convert  # noqa: E402  (2.8.19, from PYTHONPATH)
import loaderx  # noqa: E402
convert(datasets.load_from_disk(os.path.join(OUT, "saved_numeric")), os.path.join(OUT, "py2819"), codec="raw")
expected["py2819"] = {"loaderx": getattr(loaderx, "__version__", "?"),
                      "streams": sorted(os.listdir(os.path.join(OUT, "py2819")))}

with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
print("ok")
