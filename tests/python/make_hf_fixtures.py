"""Builds Hugging Face Hub fixtures for the converter tests (loaderx-cli/tests/convert_hf.rs).

    python make_hf_fixtures.py OUT

Every parquet file is written by the real `datasets` library (the one
malicious fixture aside, which needs a column name `datasets` refuses).
OUT receives:

- `files/...`: the parquet files and other repo files;
- `hub.json`: the repos for `hf_mock_server.py`: per repo its refs
  (branch/tag -> commit sha), its commits (sha -> {repo path: local file})
  and, for a gated repo, the token it requires;
- `expected.json`: per case the commit shas and, per split and column, the
  store kind, dtype, shape or rank, record count and canonical digest
  (loaderx SPEC §9), computed with numpy from the same data, and for images
  from what `datasets` itself decodes;
- `expected/*.bin`: decoded JPEG pixels for a tolerance check (JPEG
  decoders may differ by rounding).

Deterministic: the same inputs give the same files and digests.
"""

import hashlib
import io
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

import datasets

datasets.disable_progress_bars()

OUT = sys.argv[1]
FILES = os.path.join(OUT, "files")
os.makedirs(FILES, exist_ok=True)
os.makedirs(os.path.join(OUT, "expected"), exist_ok=True)

hub = {}
expected = {}


def sha_of(text):
    return hashlib.sha1(text.encode()).hexdigest()


def digest(records):
    """Canonical digest of an iterable of numpy arrays (C order, little-endian)."""
    outer = hashlib.sha256()
    n = 0
    for a in records:
        a = np.array(a, order="C")  # keeps 0-d records 0-d (ascontiguousarray would not)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        shape = ",".join(str(d) for d in a.shape)
        outer.update(f"{shape}|{hashlib.sha256(a.tobytes()).hexdigest()}\n".encode())
        n += 1
    return outer.hexdigest(), n


DTYPES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.int64): "i64",
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}


def column(records, kind, dtype, shape=None, ndim=None):
    d, n = digest(records)
    entry = {"kind": kind, "dtype": DTYPES[np.dtype(dtype)], "records": n, "digest": d}
    if kind == "dense":
        entry["shape"] = list(shape)
    else:
        entry["ndim"] = ndim
    return entry


def save(ds, name, row_group=None):
    path = os.path.join(FILES, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if row_group:
        ds.to_parquet(path, batch_size=row_group)
    else:
        ds.to_parquet(path)
    return os.path.relpath(path, OUT)


def text_file(name, text):
    path = os.path.join(FILES, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return os.path.relpath(path, OUT)


def png(array, mode):
    buf = io.BytesIO()
    Image.fromarray(array, mode).save(buf, format="PNG")
    return buf.getvalue()


def decoded_images(ds, col):
    """What `datasets` decodes, as numpy arrays."""
    return [np.asarray(ds[i][col]) for i in range(len(ds))]


rng = np.random.default_rng(20240601)

# --- A. MNIST-like: Image (PNG, 28x28, L) + ClassLabel; parquet only on the
# Hub's conversion branch refs/convert/parquet; train in two shards.
features = datasets.Features(
    {"image": datasets.Image(), "label": datasets.ClassLabel(names=[str(i) for i in range(10)])}
)
mnist = {}
mnist_expect = {}
for split, n in [("train", 600), ("test", 200)]:
    pixels = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    pixels[:, :4, :] = 0  # some structure, like a digit's margin
    labels = rng.integers(0, 10, size=n).astype(np.int64)
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(p, "L"), "path": None} for p in pixels], "label": labels},
        features=features,
    )
    decoded = decoded_images(ds, "image")
    assert all(np.array_equal(a, b) for a, b in zip(decoded, pixels)), "PNG must be lossless"
    if split == "train":
        for k in range(2):
            part = ds.shard(2, k, contiguous=True)
            mnist[f"mnist/train/{k:04d}.parquet"] = save(part, f"mnist/pq/train/{k:04d}.parquet", 128)
    else:
        mnist[f"mnist/{split}/0000.parquet"] = save(ds, f"mnist/pq/{split}/0000.parquet", 64)
    mnist_expect[split] = {
        "records": n,
        "columns": {
            "image": column(decoded, "dense", np.uint8, shape=(28, 28)),
            "label": column(list(labels), "dense", np.int64, shape=()),
        },
    }
mnist_main = sha_of("mnist main")
mnist_pq = sha_of("mnist parquet")
mnist_v0 = sha_of("mnist v0")  # an older commit: the parquet branch is not its conversion
hub["test/mnist-like"] = {
    "refs": {"main": mnist_main, "v0": mnist_v0, "refs/convert/parquet": mnist_pq},
    "commits": {
        mnist_v0: {"README.md": text_file("mnist/README-v0.md", "# mnist-like v0\n")},
        mnist_main: {
            ".gitattributes": text_file("mnist/gitattributes", "*.parquet filter=lfs\n"),
            "README.md": text_file("mnist/README.md", "# mnist-like\n"),
        },
        mnist_pq: mnist,
    },
}
expected["mnist"] = {
    "repo": "test/mnist-like",
    "commit": mnist_main,
    "parquet_commit": mnist_pq,
    "config": "mnist",
    "splits": mnist_expect,
}

# --- B. Numeric: ragged int lists, Array2D, fixed-length lists, ragged
# Array3D, and i64/u64/f64/f16/u8/bool scalars; parquet in the main tree.
features = datasets.Features(
    {
        "tokens": datasets.Sequence(datasets.Value("int32")),
        "mat": datasets.Array2D(shape=(3, 4), dtype="float32"),
        "fixed": datasets.Sequence(datasets.Value("int16"), length=3),
        "vol": datasets.Array3D(shape=(None, 2, 2), dtype="int64"),
        "i64": datasets.Value("int64"),
        "u64": datasets.Value("uint64"),
        "f64": datasets.Value("float64"),
        "f16": datasets.Value("float16"),
        "u8": datasets.Value("uint8"),
        "flag": datasets.Value("bool"),
    }
)


def numeric(n, offset):
    lengths = rng.integers(1, 21, size=n)
    tokens = [rng.integers(-(2**31), 2**31, size=k, dtype=np.int64).astype(np.int32) for k in lengths]
    mat = rng.standard_normal((n, 3, 4)).astype(np.float32)
    fixed = rng.integers(-(2**15), 2**15, size=(n, 3)).astype(np.int16)
    vol = [rng.integers(-(2**62), 2**62, size=(k, 2, 2), dtype=np.int64) for k in rng.integers(1, 4, size=n)]
    i64 = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
    i64[:2] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    u64 = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64)
    u64[:2] = [np.iinfo(np.uint64).max, 2**63 + offset]
    f64 = rng.standard_normal(n)
    f64[:4] = [-0.0, np.inf, -np.inf, 1e-310]
    f16 = rng.standard_normal(n).astype(np.float16)
    u8 = rng.integers(0, 256, size=n, dtype=np.uint8)
    flag = rng.integers(0, 2, size=n).astype(bool)
    table = pa.table(
        {
            "tokens": pa.array(tokens, type=pa.list_(pa.int32())),
            "mat": pa.array([m.tolist() for m in mat], type=pa.list_(pa.list_(pa.float32()))),
            "fixed": pa.array(fixed.tolist(), type=pa.list_(pa.int16(), 3)),
            "vol": pa.array([v.tolist() for v in vol], type=pa.list_(pa.list_(pa.list_(pa.int64())))),
            "i64": pa.array(i64),
            "u64": pa.array(u64),
            "f64": pa.array(f64),
            "f16": pa.array(f16),
            "u8": pa.array(u8),
            "flag": pa.array(flag),
        }
    )
    ds = datasets.Dataset(table).cast(features)
    cols = {
        "tokens": column(tokens, "ragged", np.int32, ndim=1),
        "mat": column(list(mat), "dense", np.float32, shape=(3, 4)),
        "fixed": column(list(fixed), "dense", np.int16, shape=(3,)),
        "vol": column(vol, "ragged", np.int64, ndim=3),
        "i64": column(list(i64), "dense", np.int64, shape=()),
        "u64": column(list(u64), "dense", np.uint64, shape=()),
        "f64": column(list(f64), "dense", np.float64, shape=()),
        "f16": column(list(f16), "dense", np.float16, shape=()),
        "u8": column(list(u8), "dense", np.uint8, shape=()),
        "flag": column(list(flag), "dense", np.bool_, shape=()),
    }
    # The library round trip keeps every value (what `datasets` reads back).
    back = ds.with_format("numpy")
    assert np.array_equal(back["u64"], u64) and np.array_equal(back["i64"], i64)
    return ds, cols


numeric_files = {}
numeric_expect = {}
for split, n in [("train", 40000), ("test", 500)]:
    ds, cols = numeric(n, 1 if split == "train" else 2)
    if split == "train":
        for k in range(2):
            name = f"data/train-{k:05d}-of-00002.parquet"
            numeric_files[name] = save(ds.shard(2, k, contiguous=True), f"numeric/{name}", 5000)
    else:
        name = "data/test-00000-of-00001.parquet"
        numeric_files[name] = save(ds, f"numeric/{name}", 128)
    numeric_expect[split] = {"records": n, "columns": cols}
numeric_files["README.md"] = text_file("numeric/README.md", "# numeric\n")
numeric_sha = sha_of("numeric main")
hub["test/numeric"] = {"refs": {"main": numeric_sha}, "commits": {numeric_sha: numeric_files}}
expected["numeric"] = {
    "repo": "test/numeric",
    "commit": numeric_sha,
    "parquet_commit": numeric_sha,
    "config": "default",
    "splits": numeric_expect,
}

# --- Four parquet files of one split, for four writers converting at once.
parts_files = {}
parts_ds, parts_cols = numeric(1001, 3)
for k in range(4):
    name = f"data/train-{k:05d}-of-00004.parquet"
    parts_files[name] = save(parts_ds.shard(4, k, contiguous=True), f"parts/{name}", 64)
parts_sha = sha_of("parts main")
hub["test/parts"] = {"refs": {"main": parts_sha}, "commits": {parts_sha: parts_files}}
expected["parts"] = {
    "repo": "test/parts",
    "commit": parts_sha,
    "parquet_commit": parts_sha,
    "config": "default",
    "splits": {"train": {"records": 1001, "columns": parts_cols}},
}

# --- C. Images of different sizes (PNG RGB -> Ragged) and fixed-size JPEG
# photos (-> Dense, compared with a tolerance).
features = datasets.Features(
    {"image": datasets.Image(), "photo": datasets.Image(), "label": datasets.Value("int32")}
)
n = 40
images = [rng.integers(0, 256, size=(int(h), int(w), 3), dtype=np.uint8)
          for h, w in zip(rng.integers(5, 40, size=n), rng.integers(5, 40, size=n))]
photos = []
for k in range(n):
    yy, xx = np.mgrid[0:16, 0:16]
    smooth = np.stack([(yy * 8 + k) % 256, (xx * 8 + 2 * k) % 256, ((yy + xx) * 4) % 256], axis=-1)
    buf = io.BytesIO()
    Image.fromarray(smooth.astype(np.uint8), "RGB").save(buf, format="JPEG", quality=95, subsampling=0)
    photos.append(buf.getvalue())
ds = datasets.Dataset.from_dict(
    {
        "image": [{"bytes": png(a, "RGB"), "path": None} for a in images],
        "photo": [{"bytes": b, "path": None} for b in photos],
        "label": np.arange(n, dtype=np.int32),
    },
    features=features,
)
decoded = decoded_images(ds, "image")
assert all(np.array_equal(a, b) for a, b in zip(decoded, images))
photo_pixels = decoded_images(ds, "photo")
with open(os.path.join(OUT, "expected", "photos_train.bin"), "wb") as f:
    for p in photo_pixels:
        f.write(np.ascontiguousarray(p, dtype=np.uint8).tobytes())
images_sha = sha_of("images main")
hub["test/images"] = {
    "refs": {"main": images_sha},
    "commits": {images_sha: {"data/train-00000-of-00001.parquet": save(ds, "images/train.parquet", 16)}},
}
expected["images"] = {
    "repo": "test/images",
    "commit": images_sha,
    "parquet_commit": images_sha,
    "config": "default",
    "splits": {
        "train": {
            "records": n,
            "columns": {
                "image": column(decoded, "ragged", np.uint8, ndim=3),
                "label": column(list(np.arange(n, dtype=np.int32)), "dense", np.int32, shape=()),
                "photo": {"kind": "dense", "dtype": "u8", "shape": [16, 16, 3], "records": n,
                          "pixels": "expected/photos_train.bin"},
            },
        }
    },
}

# --- D. Columns that cannot be stored losslessly, one config each.
bad = {}
ds = datasets.Dataset.from_dict(
    {"x": np.arange(5, dtype=np.int32), "text": ["a", "b", "c", "d", "e"]},
    features=datasets.Features({"x": datasets.Value("int32"), "text": datasets.Value("string")}),
)
bad["strings/train-00000-of-00001.parquet"] = save(ds, "bad/strings.parquet")
ds = datasets.Dataset.from_dict(
    {"x": np.arange(5, dtype=np.int32), "maybe": [1, 2, None, 4, 5]},
    features=datasets.Features({"x": datasets.Value("int32"), "maybe": datasets.Value("int64")}),
)
bad["nulls/train-00000-of-00001.parquet"] = save(ds, "bad/nulls.parquet")
ds = datasets.Dataset.from_dict(
    {"seq": [[1, 2], [3], [], [4]]},
    features=datasets.Features({"seq": datasets.Sequence(datasets.Value("int32"))}),
)
bad["empty/train-00000-of-00001.parquet"] = save(ds, "bad/empty.parquet")
gray = rng.integers(0, 256, size=(8, 8), dtype=np.uint8)
color = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
ds = datasets.Dataset.from_dict(
    {"picture": [{"bytes": png(gray, "L"), "path": None}, {"bytes": png(color, "RGB"), "path": None}]},
    features=datasets.Features({"picture": datasets.Image()}),
)
bad["mixed/train-00000-of-00001.parquet"] = save(ds, "bad/mixed.parquet")
bad_sha = sha_of("bad main")
hub["test/bad"] = {"refs": {"main": bad_sha}, "commits": {bad_sha: bad}}

# A column whose name would escape the output root (pyarrow: `datasets`
# would not write it), and a listing with a file name that escapes.
evil_path = os.path.join(FILES, "evil", "train.parquet")
os.makedirs(os.path.dirname(evil_path), exist_ok=True)
pq.write_table(pa.table({"../../escaped": pa.array([1, 2, 3], type=pa.int32())}), evil_path)
evil_sha = sha_of("evil main")
hub["test/evil-column"] = {
    "refs": {"main": evil_sha},
    "commits": {evil_sha: {"data/train-00000-of-00001.parquet": os.path.relpath(evil_path, OUT)}},
}
evil_listing = sha_of("evil listing")
hub["test/evil-listing"] = {
    "refs": {"main": evil_listing},
    "commits": {evil_listing: {"data/../../../escaped-00000-of-00001.parquet": os.path.relpath(evil_path, OUT)}},
}

# A Hub that serves files of another commit than the one asked for.
liar_sha = sha_of("liar main")
hub["test/liar"] = {
    "refs": {"main": liar_sha},
    "serve_commit": sha_of("liar other"),
    "commits": {liar_sha: {"data/train-00000-of-00001.parquet": os.path.relpath(evil_path, OUT)}},
}

# --- E. A gated repo: every request needs `Authorization: Bearer <token>`.
ds = datasets.Dataset.from_dict(
    {"x": np.arange(10, dtype=np.int64) * 7},
    features=datasets.Features({"x": datasets.Value("int64")}),
)
gated_sha = sha_of("gated main")
hub["test/gated"] = {
    "token": "hf_gated_fixture_token_5bd1",
    "refs": {"main": gated_sha},
    "commits": {gated_sha: {"data/train-00000-of-00001.parquet": save(ds, "gated/train.parquet")}},
}
expected["gated"] = {
    "repo": "test/gated",
    "token": hub["test/gated"]["token"],
    "commit": gated_sha,
    "parquet_commit": gated_sha,
    "config": "default",
    "splits": {"train": {"records": 10, "columns": {
        "x": column(list(np.arange(10, dtype=np.int64) * 7), "dense", np.int64, shape=())}}},
}

# --- F. Revision pinning: `main` moved from commit OLD to NEW; tag v1 = OLD.
moving = {}
for version, values in [("old", np.arange(10, dtype=np.int64)), ("new", np.arange(100, 115, dtype=np.int64))]:
    ds = datasets.Dataset.from_dict({"x": values}, features=datasets.Features({"x": datasets.Value("int64")}))
    sha = sha_of(f"moving {version}")
    moving[version] = (sha, save(ds, f"moving/{version}.parquet"), values)
hub["test/moving"] = {
    "refs": {"main": moving["new"][0], "v1": moving["old"][0]},
    "commits": {sha: {"data/train-00000-of-00001.parquet": path} for sha, path, _ in moving.values()},
}
for version, (sha, _, values) in moving.items():
    expected[f"moving_{version}"] = {
        "repo": "test/moving",
        "commit": sha,
        "parquet_commit": sha,
        "config": "default",
        "splits": {"train": {"records": len(values), "columns": {
            "x": column(list(values), "dense", np.int64, shape=())}}},
    }

# --- G. Text classification: string text (with a null and an empty
# string in train), ClassLabel label; a tokenizer trained here with the
# Python `tokenizers` library; expected token ids from that library.
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

WORDS = ["the", "movie", "was", "great", "awful", "café", "plot", "🙂", "naïve", "演员", "acting",
         "not", "really", "fun", "boring", "!", "?", "and", "but", "ending"]


def sentence():
    k = int(rng.integers(1, 12))
    return " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), size=k))


text_rows = {"train": [sentence() for _ in range(300)], "test": [sentence() for _ in range(50)]}
text_rows["train"][3] = None
text_rows["train"][5] = ""
text_labels = {s: rng.integers(0, 2, size=len(r)).astype(np.int64) for s, r in text_rows.items()}

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator([t for t in text_rows["train"] if t], trainer=trainer)
bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
tok.post_processor = processors.TemplateProcessing(
    single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
os.makedirs(os.path.join(OUT, "tokenizer"), exist_ok=True)
tok.save(os.path.join(OUT, "tokenizer", "tokenizer.json"))

text_features = datasets.Features(
    {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])})
text_files = {}
for split, rows in text_rows.items():
    ds = datasets.Dataset.from_dict({"text": rows, "label": text_labels[split]}, features=text_features)
    name = f"data/{split}-00000-of-00001.parquet"
    text_files[name] = save(ds, f"text/{name}", 64)
text_files["README.md"] = text_file("text/README.md", "# text\n")
text_sha = sha_of("text main")
hub["test/text"] = {"refs": {"main": text_sha}, "commits": {text_sha: text_files}}


def text_case(columns):
    splits = {}
    for split, rows in text_rows.items():
        keep = [i for i, t in enumerate(rows) if t]  # drop the null and the empty string
        cols = {}
        for name, make in columns.items():
            if name == "label":
                labels = text_labels[split] if make == "all" else text_labels[split][keep]
                cols["label"] = column(list(labels), "dense", np.int64, shape=())
            else:
                dtype, records = make(rows, keep)
                cols[name] = column(records, "ragged", dtype, ndim=1)
        n = len(rows) if columns.get("label") == "all" else len(keep)
        splits[split] = {"records": n, "columns": cols}
    return {"repo": "test/text", "commit": text_sha, "parquet_commit": text_sha,
            "config": "default", "splits": splits}


def utf8(rows, keep):
    return np.uint8, [np.frombuffer(rows[i].encode("utf-8"), dtype=np.uint8) for i in keep]


def tokens(add_special, append_eos):
    def make(rows, keep):
        out = []
        for i in keep:
            ids = tok.encode(rows[i], add_special_tokens=add_special).ids
            if append_eos:
                ids = ids + [eos]
            out.append(np.array(ids, dtype=np.uint32))
        return np.uint32, out
    return make


expected["text_labels"] = text_case({"label": "all"})
expected["text_bytes"] = text_case({"text": utf8, "label": "kept"})
expected["text_tokens"] = text_case({"text": tokens(False, False), "label": "kept"})
expected["text_tokens_special"] = text_case({"text": tokens(True, True), "label": "kept"})
expected["text_tokens_special"]["eos_id"] = eos
# The same tokenizer as a Hub model repo, with a tokenizer_config.json naming its EOS.
tok_sha = sha_of("tokenizer model main")
hub["test/tok-model"] = {"refs": {"main": tok_sha}, "commits": {tok_sha: {
    "tokenizer.json": os.path.relpath(os.path.join(OUT, "tokenizer", "tokenizer.json"), OUT),
    "tokenizer_config.json": text_file("tok-model/tokenizer_config.json", json.dumps({"eos_token": "</s>"})),
}}}
expected["tok_model"] = {"repo": "test/tok-model", "commit": tok_sha}

# --- H. Images of mixed modes (L and RGB, PNG and JPEG, one size): with
# --image-mode RGB every image becomes what PIL's convert("RGB") gives.
def encoded(array, mode, fmt):
    buf = io.BytesIO()
    Image.fromarray(array, mode).save(buf, format=fmt, **({"quality": 95, "subsampling": 0} if fmt == "JPEG" else {}))
    return buf.getvalue()


mixed_images = []
for k in range(24):
    yy, xx = np.mgrid[0:10, 0:12]
    gray = ((yy * 20 + xx * 5 + 7 * k) % 256).astype(np.uint8)
    color = np.stack([gray, (255 - gray), ((xx * 21 + k) % 256).astype(np.uint8)], axis=-1)
    mode, array = ("L", gray) if k % 2 == 0 else ("RGB", color)
    mixed_images.append(encoded(array, mode, "PNG" if k % 3 == 0 else "JPEG"))
mixed_ds = datasets.Dataset.from_dict(
    {"picture": [{"bytes": b, "path": None} for b in mixed_images], "label": np.arange(24, dtype=np.int64)},
    features=datasets.Features({"picture": datasets.Image(), "label": datasets.Value("int64")}),
)
modes = {Image.open(io.BytesIO(b)).mode for b in mixed_images}
assert modes == {"L", "RGB"}, modes
with open(os.path.join(OUT, "expected", "mixed_rgb.bin"), "wb") as f:
    for b in mixed_images:
        f.write(np.asarray(Image.open(io.BytesIO(b)).convert("RGB"), dtype=np.uint8).tobytes())
mixed_sha = sha_of("mixed modes main")
hub["test/mixed-modes"] = {"refs": {"main": mixed_sha}, "commits": {mixed_sha: {
    "data/train-00000-of-00001.parquet": save(mixed_ds, "mixed-modes/train.parquet", 8)}}}
expected["mixed_rgb"] = {
    "repo": "test/mixed-modes", "commit": mixed_sha, "parquet_commit": mixed_sha, "config": "default",
    "splits": {"train": {"records": 24, "columns": {
        "picture": {"kind": "dense", "dtype": "u8", "shape": [10, 12, 3], "records": 24,
                    "pixels": "expected/mixed_rgb.bin"},
        "label": column(list(np.arange(24, dtype=np.int64)), "dense", np.int64, shape=()),
    }}},
}

# --- I. A dataset card whose `configs:` block names files off the default
# layout (three levels deep, a test split named `eval`), a default config,
# a second config with a `**` glob, and a decoy file the path guess would take.
card_x = {"train": np.arange(30, dtype=np.int64), "test": np.arange(100, 110, dtype=np.int64)}
card_files = {"README.md": text_file("card/README.md", """---
license: mit
configs:
- config_name: extra
  data_files: "extra/**/*.parquet"
- config_name: main
  default: true
  data_files:
  - split: train
    path: "weird/dir/train-*.parquet"
  - split: test
    path: other/eval.parquet
---
# A dataset whose card declares its files
""")}
x_features = datasets.Features({"x": datasets.Value("int64")})
train = datasets.Dataset.from_dict({"x": card_x["train"]}, features=x_features)
for k in range(2):
    card_files[f"weird/dir/train-{k:05d}.parquet"] = save(train.shard(2, k, contiguous=True), f"card/train-{k}.parquet")
card_files["other/eval.parquet"] = save(
    datasets.Dataset.from_dict({"x": card_x["test"]}, features=x_features), "card/eval.parquet")
card_y = (np.arange(7, dtype=np.float32) / 4).astype(np.float32)
card_files["extra/a/b/part.parquet"] = save(
    datasets.Dataset.from_dict({"y": card_y}, features=datasets.Features({"y": datasets.Value("float32")})),
    "card/extra.parquet")
card_files["data/train-00000-of-00001.parquet"] = save(  # not in any config: must not be read
    datasets.Dataset.from_dict({"x": -np.arange(5, dtype=np.int64)}, features=x_features), "card/decoy.parquet")
card_sha = sha_of("card main")
hub["test/card"] = {"refs": {"main": card_sha}, "commits": {card_sha: card_files}}
expected["card_main"] = {
    "repo": "test/card", "commit": card_sha, "parquet_commit": card_sha, "config": "main",
    "splits": {split: {"records": len(v), "columns": {"x": column(list(v), "dense", np.int64, shape=())}}
               for split, v in card_x.items()},
}
expected["card_extra"] = {
    "repo": "test/card", "commit": card_sha, "parquet_commit": card_sha, "config": "extra",
    "splits": {"train": {"records": 7, "columns": {"y": column(list(card_y), "dense", np.float32, shape=())}}},
}

# --- J. Audio: WAV (PCM16) and FLAC (PCM16, PCM24), mono and stereo, at
# different sampling rates, written by soundfile; expected samples are what
# soundfile decodes (float32), channels first. A second config holds lossy
# OGG/Vorbis, compared with a tolerance.
import soundfile as sf

AUDIO = datasets.Features({"speech": datasets.Audio(), "music": datasets.Audio(), "label": datasets.Value("int64")})
FILE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def sound(frames, rate, channels, fmt, subtype):
    t = np.arange(frames) / rate
    waves = [0.6 * np.sin(2 * np.pi * (220 + 110 * c) * t) + 0.05 * rng.standard_normal(frames) for c in range(channels)]
    data = np.clip(np.stack(waves, axis=-1), -1, 1)
    buf = io.BytesIO()
    sf.write(buf, data, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def decoded_audio(blob, mono_column):
    data, rate = sf.read(io.BytesIO(blob), dtype="float32", always_2d=True)
    a = np.ascontiguousarray(data.T)  # [channels, samples]
    return (a[0] if mono_column else a), rate


def audio_table(columns):
    return pa.table({name: pa.array([{"bytes": b, "path": None} for b in blobs], type=FILE)
                     if isinstance(blobs[0], bytes) else pa.array(blobs)
                     for name, blobs in columns.items()})


rates = [8000, 16000, 22050, 44100, 48000]
kinds = [("WAV", "PCM_16"), ("FLAC", "PCM_16"), ("FLAC", "PCM_24")]
speech, music = [], []
for k in range(12):
    fmt, subtype = kinds[k % 3]
    speech.append(sound(int(rng.integers(100, 3000)), rates[k % 5], 1, fmt, subtype))
    fmt, subtype = kinds[(k + 1) % 3]
    music.append(sound(int(rng.integers(100, 3000)), rates[(k + 2) % 5], 1 if k == 4 else 2, fmt, subtype))
labels = np.arange(12, dtype=np.int64)
audio_ds = datasets.Dataset(audio_table({"speech": speech, "music": music, "label": labels})).cast(AUDIO)
audio_cols = {"label": column(list(labels), "dense", np.int64, shape=())}
for name, blobs, mono in [("speech", speech, True), ("music", music, False)]:
    decoded = [decoded_audio(b, mono) for b in blobs]
    audio_cols[name] = column([a for a, _ in decoded], "ragged", np.float32, ndim=1 if mono else 2)
    audio_cols[name + ".sampling_rate"] = column([np.uint32(r) for _, r in decoded], "dense", np.uint32, shape=())
assert {sf.info(io.BytesIO(b)).channels for b in music} == {1, 2}

clips = [sound(int(rng.integers(2000, 6000)), rates[k % 5], 1 + k % 2, "OGG", "VORBIS") for k in range(4)]
lossy_ds = datasets.Dataset(audio_table({"clip": clips})).cast(datasets.Features({"clip": datasets.Audio()}))
clip_decoded = [decoded_audio(b, False) for b in clips]
with open(os.path.join(OUT, "expected", "clips.bin"), "wb") as f:
    for a, _ in clip_decoded:
        f.write(a.astype("<f4").tobytes())
audio_sha = sha_of("audio main")
hub["test/audio"] = {"refs": {"main": audio_sha}, "commits": {audio_sha: {
    "data/train-00000-of-00001.parquet": save(audio_ds, "audio/train.parquet", 5),
    "lossy/train-00000-of-00001.parquet": save(lossy_ds, "audio/lossy.parquet"),
}}}
expected["audio"] = {
    "repo": "test/audio", "commit": audio_sha, "parquet_commit": audio_sha, "config": "default",
    "splits": {"train": {"records": 12, "columns": audio_cols}},
}
expected["audio_lossy"] = {
    "repo": "test/audio", "commit": audio_sha, "parquet_commit": audio_sha, "config": "lossy",
    "splits": {"train": {"records": 4, "columns": {
        "clip": {"kind": "ragged", "dtype": "f32", "ndim": 2, "records": 4,
                 "samples": "expected/clips.bin", "tolerance": 1e-4,
                 "shapes": [list(a.shape) for a, _ in clip_decoded]},
        "clip.sampling_rate": column([np.uint32(r) for _, r in clip_decoded], "dense", np.uint32, shape=()),
    }}},
}

with open(os.path.join(OUT, "hub.json"), "w") as f:
    json.dump({"repos": hub}, f, indent=1, sort_keys=True)
with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
print("ok", len(hub), "repos")
