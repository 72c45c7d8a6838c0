"""Builds the language-model demo's corpus as a Hugging Face dataset repo.

    python make_corpus.py FORTUNES_DIR OUT [--bpe VOCAB]

FORTUNES_DIR is Debian's `fortunes` (/usr/share/games/fortunes): files of
quotations separated by lines holding `%`. Every quotation (the two ASCII
art files left out) becomes one record of a `text` column, duplicates
dropped, split deterministically by a 64-bit FNV-1a hash of its UTF-8
bytes: hash % 20 == 0 is `test`, == 1 `validation`, the rest `train` (the
Rust test of examples/candle-lm splits the same way). The splits are written
as parquet by the real `datasets` library, and OUT/hub.json describes the
repo `local/fortunes` for tests/python/hf_mock_server.py, so that
`loaderx convert hf local/fortunes ROOT --text bytes` imports it through the
product's own path. With `--bpe VOCAB`, a byte-level BPE tokenizer of
VOCAB tokens is trained on the train split with the `tokenizers` library
and saved as OUT/tokenizer.json, for `loaderx convert hf … --tokenizer
OUT/tokenizer.json` (Ragged u32 token ids, the conversion pinned to it).
"""

import hashlib
import json
import os
import sys

import datasets

datasets.disable_progress_bars()

SKIP = {"art", "ascii-art"}


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def quotations(root):
    seen = set()
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if "." in name or name in SKIP or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for q in text.split("\n%\n"):
            q = q.strip("\n").rstrip()
            if q and q != "%" and q not in seen:
                seen.add(q)
                yield q


def main():
    root, out = sys.argv[1], sys.argv[2]
    splits = {"train": [], "validation": [], "test": []}
    for q in quotations(root):
        h = fnv1a(q.encode("utf-8")) % 20
        splits["test" if h == 0 else "validation" if h == 1 else "train"].append(q)
    files = {}
    for split, rows in splits.items():
        rel = f"data/{split}-00000-of-00001.parquet"
        path = os.path.join(out, "files", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        datasets.Dataset.from_dict({"text": rows}).to_parquet(path)
        files[rel] = os.path.relpath(path, out)
    sha = hashlib.sha1(json.dumps(splits, sort_keys=True).encode()).hexdigest()
    hub = {"local/fortunes": {"refs": {"main": sha}, "commits": {sha: files}}}
    with open(os.path.join(out, "hub.json"), "w") as f:
        json.dump({"repos": hub}, f, indent=1, sort_keys=True)
    print(" ".join(f"{k}={len(v)}" for k, v in splits.items()), "records")
    if "--bpe" in sys.argv:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        vocab = int(sys.argv[sys.argv.index("--bpe") + 1])
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(splits["train"], trainer)
        tok.save(os.path.join(out, "tokenizer.json"))
        print("tokenizer.json:", tok.get_vocab_size(), "tokens")


main()
