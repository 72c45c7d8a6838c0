"""Fixtures for loaderx-cli/tests/convert_folders.rs: an image folder of
real PNG and JPEG files written by Pillow, and WebDataset shards written by
the `webdataset` package's `TarWriter`, with what the stores must hold.

Usage: python make_folder_fixtures.py DIR

Writes under DIR:

- `folder/{train,test}/<class>/<file>.{png,jpg}`: the image folder;
- `shards/shard-00000{0,1}.tar`: 10 samples (6 + 4), members `.png`,
  `.cls`, `.txt`, `.json`, `.npy` (float32, rows of varying length:
  Ragged) and `.arr.npy` (big-endian int16 2 x 3 in Fortran order: Dense);
- `hostile/`: shards a converter must refuse (a `../x` member, a truncated
  shard, a sample missing a member);
- `expected.json`: per image-folder split the files in record order, their
  labels, the classes, the canonical digest of the PNG split (loaderx SPEC
  section 9, `tests/python/interop.py` `record_line`), the decoded pixels
  of every image (`expected/<split>-<k>.bin`, PIL's `np.asarray`); per
  WebDataset column the canonical digest of the records.

Deterministic: the same inputs give the same files and digests.
"""

import hashlib
import io
import json
import os
import sys
import tarfile

import numpy as np
from PIL import Image
import webdataset as wds


def record_line(rec):
    arr = np.asarray(rec)
    dims = ",".join(str(d) for d in arr.shape)
    return f"{dims}|{hashlib.sha256(arr.tobytes(order='C')).hexdigest()}\n".encode()


def digest(records):
    h, n = hashlib.sha256(), 0
    for rec in records:
        h.update(record_line(rec))
        n += 1
    return h.hexdigest(), n


def little(arr):
    """The array in C order and little-endian, as a store holds it."""
    arr = np.ascontiguousarray(arr)
    return arr.astype(arr.dtype.newbyteorder("<"))


def smooth(rng, h, w):
    """A smooth RGB image (JPEG decoders agree closely on smooth images)."""
    y, x = np.mgrid[0:h, 0:w]
    base = rng.integers(0, 128, 3)
    img = np.stack([(base[c] + 8 * x + 5 * y + 3 * c) % 256 for c in range(3)], axis=-1)
    return img.astype(np.uint8)


def png_bytes(arr, mode):
    buf = io.BytesIO()
    Image.fromarray(arr, mode).save(buf, format="PNG")
    return buf.getvalue()


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(45)
    expected = {"folder": {}, "webdataset": {}}
    os.makedirs(os.path.join(out, "expected"))

    # ---- the image folder: train (cat PNG, dog JPEG), test (cat, emu PNG).
    layout = {
        "train": {"cat": ("png", 5), "dog": ("jpg", 5)},
        "test": {"cat": ("png", 2), "emu": ("png", 2)},
    }
    classes = sorted({c for split in layout.values() for c in split})
    for split, class_files in layout.items():
        for cls, (fmt, count) in class_files.items():
            d = os.path.join(out, "folder", split, cls)
            os.makedirs(d)
            for k in range(count):
                path = os.path.join(d, f"{cls}-{k:02d}.{fmt}")
                arr = smooth(rng, 6, 7)
                if fmt == "png":
                    Image.fromarray(arr, "RGB").save(path, format="PNG")
                else:
                    Image.fromarray(arr, "RGB").save(path, format="JPEG", quality=95, subsampling=0)
    for split in layout:
        root = os.path.join(out, "folder", split)
        files = sorted(
            os.path.relpath(os.path.join(dp, f), root)
            for dp, _, fs in os.walk(root)
            for f in fs
        )
        pixels = []
        for k, rel in enumerate(files):
            arr = np.asarray(Image.open(os.path.join(root, rel)))
            name = f"expected/{split}-{k}.bin"
            with open(os.path.join(out, name), "wb") as f:
                f.write(arr.tobytes())
            pixels.append(
                {"file": rel, "pixels": name, "shape": list(arr.shape), "exact": rel.endswith(".png")}
            )
        entry = {
            "files": files,
            "labels": [classes.index(rel.split(os.sep)[0]) for rel in files],
            "images": pixels,
        }
        if all(p["exact"] for p in pixels):
            entry["image_digest"] = digest(
                np.asarray(Image.open(os.path.join(root, rel))) for rel in files
            )[0]
        expected["folder"][split] = entry
    expected["classes"] = classes

    # ---- WebDataset shards, written by TarWriter.
    shards = os.path.join(out, "shards")
    os.makedirs(shards)
    samples = []
    for i in range(10):
        img = smooth(rng, 4, 5)
        rows = int(rng.integers(1, 4))
        samples.append(
            {
                "__key__": f"sample{i:06d}",
                "png": png_bytes(img, "RGB"),
                "cls": int(rng.integers(0, 10)) - 3,
                "txt": f"caption {i}: {'é' * (i + 1)}",
                "json": json.dumps({"id": i, "tags": ["a", "b"][: i % 3]}),
                "npy": rng.standard_normal((rows, 3)).astype(np.float32),
                "arr.npy": np.asfortranarray(
                    rng.integers(-1000, 1000, (2, 3)).astype(">i2")
                ),
                "_img": img,
            }
        )

    def npy_bytes(arr):
        buf = io.BytesIO()
        np.save(buf, arr)
        return buf.getvalue()

    for shard, chunk in ((0, samples[:6]), (1, samples[6:])):
        with wds.TarWriter(os.path.join(shards, f"shard-{shard:06d}.tar")) as sink:
            for s in chunk:
                sink.write(
                    {
                        "__key__": s["__key__"],
                        "png": s["png"],
                        "cls": s["cls"],
                        "txt": s["txt"],
                        "json": s["json"],
                        "npy": npy_bytes(s["npy"]),
                        "arr.npy": npy_bytes(s["arr.npy"]),
                    }
                )
    w = expected["webdataset"]
    w["png"] = digest(s["_img"] for s in samples)[0]
    w["png_encoded"] = digest(np.frombuffer(s["png"], np.uint8) for s in samples)[0]
    w["cls"] = digest(np.int64(s["cls"]) for s in samples)[0]
    w["txt"] = digest(np.frombuffer(s["txt"].encode(), np.uint8) for s in samples)[0]
    w["json"] = digest(np.frombuffer(s["json"].encode(), np.uint8) for s in samples)[0]
    w["npy"] = digest(little(s["npy"]) for s in samples)[0]
    w["arr.npy"] = digest(little(s["arr.npy"]) for s in samples)[0]

    # ---- hostile shards.
    hostile = os.path.join(out, "hostile")
    os.makedirs(hostile)

    def add(tar, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(os.path.join(hostile, "escape.tar"), "w") as tar:
        add(tar, "000000.cls", b"1")
        add(tar, "../x.cls", b"2")
    with wds.TarWriter(os.path.join(hostile, "missing.tar")) as sink:
        sink.write({"__key__": "a000", "cls": 1, "txt": "one"})
        sink.write({"__key__": "a001", "cls": 2})
        sink.write({"__key__": "a002", "cls": 3, "txt": "three"})
    with open(os.path.join(shards, "shard-000000.tar"), "rb") as f:
        whole = f.read()
    with open(os.path.join(hostile, "truncated.tar"), "wb") as f:
        f.write(whole[: len(whole) // 2 + 100])

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main()
