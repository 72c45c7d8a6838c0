"""The stream section's peer: Hugging Face `datasets` streaming.

    python stream_peer.py URLS_JSON BATCH SEED BUFFER RECORDS IDS_OUT

Streams the parquet files at the URLs (through the same throttled link as
loaderx) with `load_dataset("parquet", ..., streaming=True)`, shuffled by
`shuffle(seed=SEED, buffer_size=BUFFER)`, in Arrow format (its fastest),
and reads RECORDS records in batches of BATCH (0: the whole epoch).
Prints one JSON line: seconds to the first batch, records read, seconds
for them (from the `load_dataset` call; imports not counted), and writes
the ids in delivered order to IDS_OUT (int64, raw), for the shuffle-quality numbers.
"""

import json
import os
import sys
import time

import numpy as np

import datasets  # noqa: E402

datasets.disable_progress_bars()
# Timed from here, as loaderx is from its open (imports not counted).
t0 = time.perf_counter()
urls = json.load(open(sys.argv[1]))
batch, seed, buffer, want, ids_out = (
    int(sys.argv[2]),
    int(sys.argv[3]),
    int(sys.argv[4]),
    int(sys.argv[5]),
    sys.argv[6],
)
ds = datasets.load_dataset("parquet", data_files={"train": urls}, split="train", streaming=True)
ds = ds.shuffle(seed=seed, buffer_size=buffer).with_format("arrow")
first = None
ids = []
n = 0
for b in ds.iter(batch_size=batch):
    if first is None:
        first = time.perf_counter() - t0
    ids.append(b.column("id").to_numpy())
    n += b.num_rows
    if want and n >= want:
        break
seconds = time.perf_counter() - t0
np.concatenate(ids).astype("<i8").tofile(ids_out)
print(json.dumps({"first_batch": first, "records": n, "seconds": seconds}), flush=True)
# Leaving the stream mid-way leaves fsspec's event-loop threads running;
# the interpreter's finalization can then abort (PyGILState_Release):
# exit without it.
os._exit(0)
