#!/usr/bin/env python3
"""JSON Lines fixtures for `loaderx-cli/tests/convert_jsonl.rs`.

Writes OUT_DIR/data.jsonl with Python's `json` module (ten rows, a blank
line among them) and OUT_DIR/expected.json: per column, the canonical
digest `[sha256-hex, count]` of the records the converter must store,
computed with NumPy from the same Python values (integers int64, floats
float64, booleans bool, strings their UTF-8 bytes as uint8, lists arrays of
their nesting).

Canonical digest: SHA-256 over one ASCII line per record, in order,
  "<d0>,<d1>,...|<sha256-hex of the record's C-order little-endian bytes>\\n"
(as tests/python/interop.py's `record_line`).
"""

import hashlib
import json
import sys

import numpy as np


def record_line(rec):
    arr = np.asarray(rec)
    arr = arr.astype(arr.dtype.newbyteorder("<"))
    dims = ",".join(str(d) for d in arr.shape)
    return f"{dims}|{hashlib.sha256(arr.tobytes(order='C')).hexdigest()}\n".encode()


def digest(records):
    h, n = hashlib.sha256(), 0
    for rec in records:
        h.update(record_line(rec))
        n += 1
    return [h.hexdigest(), n]


def rows():
    out = []
    for k in range(10):
        out.append({
            "i": [0, -1, 2**53 + 1, -(2**63), 2**63 - 1, 7, 42, -42, 1000000, 3][k],
            "f": [0.1, -2.5, 1e-300, 1e300, 3.0, -0.0, 2.5e-8, 123456.789, 1.0, 0.5][k],
            "b": k % 3 == 0,
            "s": ["héllo", "a", "日本語", "x" * 50, "tab\there", "quote\"s", "é", "z", "line\nbreak", "end"][k],
            "tok": list(range(k, k + 1 + k % 4)),
            "xy": [k * 0.5, -k * 1.25],
            "grid": [[k, k + 1, k + 2], [k * 10, k * 11, -k]],
            "nest": [[k, -k]] * (1 + k % 3),
        })
    return out


def main():
    out = sys.argv[1]
    data = rows()
    with open(f"{out}/data.jsonl", "w", encoding="utf-8") as f:
        for k, row in enumerate(data):
            f.write(json.dumps(row, ensure_ascii=k % 2 == 0) + "\n")
            if k == 4:
                f.write("\n")
    expected = {
        "i": digest(np.int64(r["i"]) for r in data),
        "f": digest(np.float64(r["f"]) for r in data),
        "b": digest(np.bool_(r["b"]) for r in data),
        "s": digest(np.frombuffer(r["s"].encode("utf-8"), dtype=np.uint8) for r in data),
        "tok": digest(np.array(r["tok"], dtype=np.int64) for r in data),
        "xy": digest(np.array(r["xy"], dtype=np.float64) for r in data),
        "grid": digest(np.array(r["grid"], dtype=np.int64) for r in data),
        "nest": digest(np.array(r["nest"], dtype=np.int64) for r in data),
    }
    with open(f"{out}/expected.json", "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
