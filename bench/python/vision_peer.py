#!/usr/bin/env python3
"""The `vision` section's Python peer: PIL decoding + torchvision v2
transforms in a torch DataLoader, over an image folder.

    vision_peer.py torchvision --root DIR --pipeline train|eval --workers W
                   --batch B --min-seconds S [--seed 7] [--order tensor|pil]

`--root` is an image folder (DIR/<class>/<file>) read by torchvision's own
`ImageFolder` (PIL decodes each file, converted to RGB). The transforms:

* train: RandomResizedCrop(224) (scale (0.08, 1), ratio (3/4, 4/3),
  bilinear, antialiased), RandomHorizontalFlip, ToDtype(float32,
  scale=True), Normalize(ImageNet mean, std);
* eval: Resize(256), CenterCrop(224), ToDtype(float32, scale=True),
  Normalize.

With `--order tensor` (the default, torchvision's advice for speed) the PIL
image becomes a uint8 tensor first (`v2.ToImage`) and is cropped and resized
as a tensor; with `--order pil` the crop and resize run on the PIL image
(Pillow's resize) before `ToImage`.

Batches are collated by the DataLoader's default collate ([B, 3, 224, 224]
float32 and [B] int64 labels), in W worker processes (persistent, torch
threads 1 each; W = 0: in this process), records drawn at random with
replacement. After 2W + 2 untimed batches, batches are taken until
`--min-seconds` have passed. Prints one JSON line: images/s, and the CPU
seconds this process and its workers used in the timed window (user +
system, from /proc/<pid>/stat).
"""

import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, RandomSampler
from torchvision import datasets
from torchvision.transforms import v2

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
TICK = os.sysconf("SC_CLK_TCK")


def transform(pipeline, order):
    if pipeline == "train":
        geometry = [v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()]
    else:
        geometry = [v2.Resize(256, antialias=True), v2.CenterCrop(224)]
    steps = [v2.ToImage(), *geometry] if order == "tensor" else [*geometry, v2.ToImage()]
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    return v2.Compose(steps)


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            # Fields after the command (which may hold spaces): utime, stime
            # are the 14th and 15th of the whole line.
            rest = f.read().rsplit(")", 1)[1].split()
        total += int(rest[11]) + int(rest[12])
    return total / TICK


def worker_init(_):
    torch.set_num_threads(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("contender", choices=["torchvision"])
    p.add_argument("--root", required=True)
    p.add_argument("--pipeline", choices=["train", "eval"], required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--min-seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--order", choices=["tensor", "pil"], default="tensor")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    ds = datasets.ImageFolder(a.root, transform=transform(a.pipeline, a.order))
    sampler = RandomSampler(ds, replacement=True, num_samples=1 << 40)
    loader = DataLoader(
        ds,
        batch_size=a.batch,
        sampler=sampler,
        num_workers=a.workers,
        persistent_workers=a.workers > 0,
        worker_init_fn=worker_init if a.workers > 0 else None,
    )
    it = iter(loader)
    warmup = 2 * a.workers + 2
    for _ in range(warmup):
        x, y = next(it)
        if tuple(x.shape) != (a.batch, 3, 224, 224) or x.dtype != torch.float32:
            sys.exit(f"unexpected batch {tuple(x.shape)} {x.dtype}")
    pids = [os.getpid()] + [w.pid for w in getattr(it, "_workers", [])]
    cpu0, t0 = cpu_seconds(pids), time.perf_counter()
    batches = 0
    while True:
        x, y = next(it)
        batches += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= a.min_seconds and batches >= 3:
            break
    cpu = cpu_seconds(pids) - cpu0
    images = batches * a.batch
    print(json.dumps({
        "images_per_s": images / elapsed,
        "images": images,
        "seconds": elapsed,
        "cpu_s": cpu,
        "torch": torch.__version__,
    }), flush=True)
    del it


if __name__ == "__main__":
    main()
