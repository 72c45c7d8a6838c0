#!/usr/bin/env python3
"""CSV fixtures for `loaderx-cli/tests/convert_csv.rs`, written with Python's
`csv` module into OUT_DIR:

- `basic.csv`: a header and int, float, string and bool columns (Python
  writes booleans as True/False);
- `basic.tsv`: the same rows, tab-separated (`csv.excel_tab`);
- `quoted.csv`: every field quoted, strings holding the delimiter, a
  doubled quote and line breaks;
- `typed.csv` and `schema.json`: columns given types (uint8, float32) and
  one left out;
- `ragged.csv`: its fifth line holds three fields under a two-field header;
- `splits/`: `a-train.csv`, `b-train.csv` and `a-test.csv`, for split globs;
- `expected.json`: the rows written, per file, as Python values.
"""

import csv
import json
import os
import sys

out = sys.argv[1]
os.makedirs(os.path.join(out, "splits"), exist_ok=True)

HEADER = ["id", "score", "name", "ok"]
ROWS = [
    [1, 0.5, "alpha", True],
    [-7, 2.25, "beta gamma", False],
    [9007199254740993, -1e-3, "e, f", True],
    [0, 3.0, "delta", False],
]
QUOTED = [
    ["a, b", 'say "hi"', 1],
    ["line one\nline two", "x", 2],
    ["crlf\r\nend", ",,,", 3],
]


def write(name, header, rows, **fmt):
    with open(os.path.join(out, name), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, **fmt)
        if header:
            w.writerow(header)
        w.writerows(rows)


write("basic.csv", HEADER, ROWS)
write("basic.tsv", HEADER, ROWS, dialect="excel-tab")
write("quoted.csv", ["text", "other", "n"], QUOTED, quoting=csv.QUOTE_ALL)
write("typed.csv", ["skip", "small", "x"], [["a", 200, 1.5], ["b", 7, -2]])
with open(os.path.join(out, "schema.json"), "w") as f:
    json.dump({"x": "float32", "small": "uint8"}, f)
write("ragged.csv", ["a", "b"], [[1, 2], [3, 4], ["multi\nline", 5], [6, 7, 8]])
write("splits/a-train.csv", ["v"], [[1], [2]])
write("splits/b-train.csv", ["v"], [[3]])
write("splits/a-test.csv", ["v"], [[10], [20], [30]])

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"basic": ROWS, "quoted": QUOTED}, f)
