"""Writes the stream section's corpus: a Hub-layout parquet dataset.

    python make_stream_corpus.py OUT ROWS FILES ROWS_PER_GROUP

OUT receives `files/data/train-0000k-of-0000N.parquet` (columns `id`, the
row's index; `label`, id % 1000; `tokens`, 256 to 768 random int32 values,
so the bytes do not compress and the link carries what a real corpus of
token ids would), `files/README.md`, and `hub.json` describing the repo
`bench/stream` for tests/python/hf_mock_server.py. The files carry the
`huggingface` features metadata the `datasets` library writes.
Deterministic: the same arguments give the same files.
"""

import hashlib
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

out, rows, files, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = os.path.join(out, "files", "data")
os.makedirs(data, exist_ok=True)
features = {
    "info": {
        "features": {
            "id": {"dtype": "int64", "_type": "Value"},
            "label": {"dtype": "int64", "_type": "Value"},
            "tokens": {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "Sequence"},
        }
    }
}
schema = pa.schema(
    [("id", pa.int64()), ("label", pa.int64()), ("tokens", pa.list_(pa.int32()))],
    metadata={"huggingface": json.dumps(features)},
)
rng = np.random.default_rng(58)
per_file = rows // files
names = {}
for k in range(files):
    first = k * per_file
    n = per_file if k < files - 1 else rows - first
    ids = np.arange(first, first + n, dtype=np.int64)
    lengths = rng.integers(256, 769, size=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 2**31 - 1, size=int(offsets[-1]), dtype=np.int32)
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    table = pa.Table.from_arrays([pa.array(ids), pa.array(ids % 1000), tokens], schema=schema)
    name = f"data/train-{k:05d}-of-{files:05d}.parquet"
    pq.write_table(table, os.path.join(out, "files", name), row_group_size=group, compression="snappy")
    names[name] = os.path.join("files", name)
with open(os.path.join(out, "files", "README.md"), "w") as f:
    f.write("# stream bench corpus\n")
names["README.md"] = os.path.join("files", "README.md")
sha = hashlib.sha1(f"stream {rows} {files} {group}".encode()).hexdigest()
with open(os.path.join(out, "hub.json"), "w") as f:
    json.dump({"repos": {"bench/stream": {"refs": {"main": sha}, "commits": {sha: names}}}}, f)
print(json.dumps({"sha": sha, "files": sorted(n for n in names if n.endswith(".parquet"))}))
