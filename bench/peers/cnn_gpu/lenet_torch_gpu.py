#!/usr/bin/env python3
"""LeNet-5 on MNIST with PyTorch on a CUDA GPU: the peer for `asgd cnn --device gpu`.

The same net, loss and optimizer as bench/peers/cnn/lenet_torch.py (whose data
loader and model this imports): SGD with momentum 0.9, mean cross-entropy,
minibatches cut with index_select from a seeded permutation of a training set
that lives on the GPU, in eager mode (no torch.compile, no CUDA graphs, no AMP,
TF32 off so both sides run FP32 GEMMs). Each epoch is timed with
torch.cuda.synchronize() on both ends; the first epoch is a warm-up (cuDNN
autotuning, allocator) and reported separately. Test accuracy after the last
epoch. Also measures the SGEMM rate (4096^3 FP32 matmul) for the floor.

Prints one JSON object per batch size on stdout; progress on stderr.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cnn"))
from lenet_torch import accuracy, lenet5, load_split  # noqa: E402


def sgemm_gflops(device, n=4096, repeats=10):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize()
    return 2.0 * n ** 3 * repeats / (time.perf_counter() - t0) / 1e9


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="MNIST IDX directory (.gz or raw)")
    p.add_argument("--batches", default="64,256,1024")
    p.add_argument("--epochs", type=int, default=3, help="timed epochs after the warm-up epoch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device for torch", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    x_train, y_train = load_split(a.data, "train")
    x_test, y_test = load_split(a.data, "t10k")
    x_train, y_train = x_train.to(dev), y_train.to(dev)
    x_test, y_test = x_test.to(dev), y_test.to(dev)
    n = x_train.shape[0]
    gflops = sgemm_gflops(dev)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, SGEMM {gflops:.0f} GFLOP/s", file=sys.stderr)
    for batch in [int(b) for b in a.batches.split(",")]:
        torch.manual_seed(a.seed)
        model = lenet5().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
        loss_fn = nn.CrossEntropyLoss()
        gen = torch.Generator(device="cpu").manual_seed(a.seed)
        rates = []
        for epoch in range(a.epochs + 1):
            perm = torch.randperm(n, generator=gen).to(dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for start in range(0, n, batch):
                idx = perm[start:start + batch]
                xb, yb = x_train.index_select(0, idx), y_train.index_select(0, idx)
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(xb), yb)
                loss.backward()
                opt.step()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if epoch > 0:
                rates.append(n / dt)
            print(f"batch {batch} epoch {epoch}{' (warm-up)' if epoch == 0 else ''}: {n / dt:.0f} img/s",
                  file=sys.stderr)
        rec = {"peer": "pytorch-eager", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "batch": batch, "epochs": a.epochs + 1, "images_per_s_median": statistics.median(rates),
               "test_accuracy": accuracy(model, x_test, y_test, 1000), "sgemm_gflops": gflops}
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
