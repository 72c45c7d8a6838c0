"""Fixtures for loaderx-cli/tests/convert_webdataset.rs: WebDataset shards
as real producers write them (the `webdataset` package's `TarWriter`,
Python's `tarfile`, GNU tar), plain and gzipped, and shards with the
unusual-but-valid tar features real producers use.

Usage: python make_webdataset_fixtures.py DIR

Writes under DIR:

- `plain/train-00000{0,1,2}.tar`: 9 samples (3 per shard) written by
  `TarWriter`, members `.png`, `.cls`, `.txt`, `.npy` (float32, rows of
  varying length);
- `gz/train-00000{0,1,2}.tar.gz`: the same samples, `TarWriter` writing
  gzip (it does for a name ending in `.tar.gz`); `tgz/train-00000{0,1,2}.tgz`:
  the same members written by `tarfile.open(..., "w:gz")`;
- `truncated.tar.gz`: `gz/train-000000.tar.gz` cut in the middle;
- `webp/webp.tar`: 3 samples, a `.webp` member (Pillow, lossless) and a
  `.cls`; `webp/expected.bin`: the `.webp` members' bytes, concatenated,
  and `webp/lengths.json`: their lengths;
- `quirks/`: one shard per quirk, each 2 samples `.cls` + `.txt` (the
  `.cls` member i, the `.txt` member "text i"):
  - `gnu_long.tar`: names longer than 100 bytes (`tarfile`'s GNU format:
    GNU long-name headers);
  - `pax_long.tar`: names longer than 100 bytes and non-ASCII names (pax
    format: pax `path` records);
  - `gnu_tar_dotslash.tar`: GNU tar's `tar -cf x.tar -C dir .` (a `./`
    directory entry, `./`-prefixed members);
  - `upper.tar`: upper-case extensions (`.CLS`, `.TXT`);
  - `dotted_dirs.tar`: keys whose directories hold dots
    (`v1.2/data.set/000.cls`);
  - `pax_global.tar`: a pax global header first (as `git archive` writes);
  - `hardlink.tar`: GNU tar of a directory where two files are hard links
    of one another (the second is a hard-link member).

Deterministic: the same inputs give the same files.
"""

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

import numpy as np
from PIL import Image
import webdataset as wds


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def png_bytes(arr):
    buf = io.BytesIO()
    Image.fromarray(arr, "RGB").save(buf, format="PNG")
    return buf.getvalue()


def add(tar, name, data, mtime=1_700_000_000):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    tar.addfile(info, io.BytesIO(data))


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    for d in ("plain", "gz", "tgz", "webp", "quirks"):
        os.makedirs(os.path.join(out, d))

    # ---- the same samples, plain and gzipped.
    samples = []
    for i in range(9):
        img = rng.integers(0, 256, (4, 5, 3)).astype(np.uint8)
        samples.append(
            {
                "__key__": f"s/{i:06d}",
                "png": png_bytes(img),
                "cls": str(int(rng.integers(0, 10))).encode(),
                "txt": f"caption {i}".encode(),
                "npy": npy_bytes(rng.standard_normal((1 + i % 3, 2)).astype(np.float32)),
            }
        )
    for k in range(3):
        chunk = samples[3 * k : 3 * k + 3]
        for path in (f"plain/train-{k:06d}.tar", f"gz/train-{k:06d}.tar.gz"):
            with wds.TarWriter(os.path.join(out, path), mtime=1_700_000_000) as sink:
                for s in chunk:
                    sink.write(dict(s))
        with tarfile.open(os.path.join(out, f"tgz/train-{k:06d}.tgz"), "w:gz") as tar:
            for s in chunk:
                for ext in ("png", "cls", "txt", "npy"):
                    add(tar, f"{s['__key__']}.{ext}", s[ext])
    with open(os.path.join(out, "gz/train-000000.tar.gz"), "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "truncated.tar.gz"), "wb") as f:
        f.write(whole[: len(whole) // 2])

    # ---- WebP members, lossless, written by Pillow.
    webps = []
    with wds.TarWriter(os.path.join(out, "webp/webp.tar"), mtime=1_700_000_000) as sink:
        for i in range(3):
            buf = io.BytesIO()
            img = rng.integers(0, 256, (6, 7, 3)).astype(np.uint8)
            Image.fromarray(img, "RGB").save(buf, format="WEBP", lossless=True)
            webps.append(buf.getvalue())
            sink.write({"__key__": f"w{i:03d}", "webp": webps[-1], "cls": str(i).encode()})
    with open(os.path.join(out, "webp/expected.bin"), "wb") as f:
        f.write(b"".join(webps))
    with open(os.path.join(out, "webp/lengths.json"), "w") as f:
        json.dump([len(w) for w in webps], f)

    # ---- quirks.
    quirks = os.path.join(out, "quirks")

    def two(tar, key):
        for i in range(2):
            add(tar, f"{key(i)}.cls", str(i).encode())
            add(tar, f"{key(i)}.txt", f"text {i}".encode())

    long_dir = "d" * 60 + "/" + "e" * 60
    with tarfile.open(os.path.join(quirks, "gnu_long.tar"), "w", format=tarfile.GNU_FORMAT) as tar:
        two(tar, lambda i: f"{long_dir}/{i:03d}")
    with tarfile.open(os.path.join(quirks, "pax_long.tar"), "w", format=tarfile.PAX_FORMAT) as tar:
        two(tar, lambda i: f"{long_dir}/ключ{i:03d}")
    src = os.path.join(out, "gnu_src")
    for i in range(2):
        os.makedirs(os.path.join(src, "s"), exist_ok=True)
        with open(os.path.join(src, "s", f"{i:03d}.cls"), "w") as f:
            f.write(str(i))
        with open(os.path.join(src, "s", f"{i:03d}.txt"), "w") as f:
            f.write(f"text {i}")
    gnu = ["tar", "--sort=name", "--mtime=@1700000000", "--owner=0", "--group=0"]
    subprocess.run(
        gnu + ["-cf", os.path.join(quirks, "gnu_tar_dotslash.tar"), "-C", src, "."],
        check=True,
    )
    with tarfile.open(os.path.join(quirks, "upper.tar"), "w") as tar:
        for i in range(2):
            add(tar, f"S/{i:03d}.CLS", str(i).encode())
            add(tar, f"S/{i:03d}.TXT", f"text {i}".encode())
    with tarfile.open(os.path.join(quirks, "dotted_dirs.tar"), "w") as tar:
        two(tar, lambda i: f"v1.2/data.set/{i:03d}")
    with tarfile.open(
        os.path.join(quirks, "pax_global.tar"),
        "w",
        format=tarfile.PAX_FORMAT,
        pax_headers={"comment": "a global header"},
    ) as tar:
        two(tar, lambda i: f"{i:03d}")
    link_src = os.path.join(out, "link_src")
    os.makedirs(link_src)
    for i in range(2):
        with open(os.path.join(link_src, f"{i:03d}.cls"), "w") as f:
            f.write("1")
        with open(os.path.join(link_src, f"{i:03d}.txt"), "w") as f:
            f.write(f"text {i}")
    # 001.cls is a hard link of 000.cls: both hold "1".
    os.remove(os.path.join(link_src, "001.cls"))
    os.link(os.path.join(link_src, "000.cls"), os.path.join(link_src, "001.cls"))
    subprocess.run(
        gnu + ["-cf", os.path.join(quirks, "hardlink.tar"), "-C", link_src, "."],
        check=True,
    )


if __name__ == "__main__":
    main()
