#!/usr/bin/python3
"""LeNet-5 on MNIST with PyTorch on the CPU: the peer for asgd's CNN benchmark.

Run it with Debian's interpreter (/usr/bin/python3, package python3-torch); it needs
only torch, numpy and the standard library (no torchvision, no downloads).

What it measures
  * training: plain minibatch SGD (momentum 0.9) over an in-memory float32 tensor,
    minibatches cut with index_select from a seeded permutation, no DataLoader.
    Each epoch is timed with time.perf_counter around the whole loop; the first
    --warmup batches of every epoch are also timed on their own so a steady-state
    rate (the epoch without them) is reported next to the whole-epoch rate;
  * test accuracy after every epoch (not timed);
  * inference: model.eval(), torch.no_grad(), --eval-batch images at a time over
    the 10,000 test images, --infer-repeats passes, median images/s reported.

Model (PyTorch default initialisation: weights kaiming_uniform_(a=sqrt(5)),
biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))):
  Conv2d(1,6,5,padding=2) ReLU MaxPool2d(2) Conv2d(6,16,5) ReLU MaxPool2d(2)
  flatten(400) Linear(400,120) ReLU Linear(120,84) ReLU Linear(84,10)
  loss CrossEntropyLoss (mean over the batch), SGD(lr, momentum=0.9, weight_decay).

Output: human-readable lines on stdout, or with --json the same lines on stderr and
one JSON object on stdout.
"""

import argparse
import ctypes
import gzip
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn

MEAN, STD = 0.1307, 0.3081
INIT_NOTE = ("PyTorch default init: Conv2d/Linear weight kaiming_uniform_(a=sqrt(5)), "
             "bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))")


def parse_args(argv):
    p = argparse.ArgumentParser(description="LeNet-5 / MNIST CPU benchmark (PyTorch peer)")
    p.add_argument("--data", default="/work/shared/data/mnist",
                   help="directory with the MNIST IDX files (.gz or raw)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (intra-op)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-batch", type=int, default=1000)
    p.add_argument("--infer-repeats", type=int, default=3)
    p.add_argument("--limit-train", type=int, default=None,
                   help="use only the first N training images")
    p.add_argument("--warmup", type=int, default=20,
                   help="batches at the start of each epoch timed separately")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="openblas_set_num_threads (default: --threads); OpenBLAS runs the "
                        "Linear layers' GEMMs on its own pthread pool, beside torch's OpenMP one")
    p.add_argument("--mkldnn", choices=("on", "off"), default="on",
                   help="torch.backends.mkldnn.enabled (off: convolutions go through "
                        "im2col + BLAS instead of oneDNN)")
    p.add_argument("--json", action="store_true", help="print one JSON line of results on stdout")
    return p.parse_args(argv)


# ---------------------------------------------------------------- data

def _open_idx(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                head = f.read(2)
            if head == b"\x1f\x8b":
                with gzip.open(path, "rb") as f:
                    return path, f.read()
            with open(path, "rb") as f:
                return path, f.read()
    # the usual alternative spelling (t10k-images.idx3-ubyte)
    alt = stem.replace("-idx", ".idx")
    if alt != stem:
        return _open_idx(directory, alt)
    raise FileNotFoundError(f"no {stem}[.gz] in {directory}")


def read_idx(directory, stem):
    path, raw = _open_idx(directory, stem)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    if raw[2] != 0x08:
        raise ValueError(f"{path}: element type 0x{raw[2]:02x}, expected unsigned byte")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim
    count = int(np.prod(dims))
    if len(raw) - off < count:
        raise ValueError(f"{path}: truncated ({len(raw) - off} bytes of data, {count} expected)")
    return np.frombuffer(raw, dtype=np.uint8, count=count, offset=off).reshape(dims)


def load_split(directory, prefix):
    images = read_idx(directory, f"{prefix}-images-idx3-ubyte")
    labels = read_idx(directory, f"{prefix}-labels-idx1-ubyte")
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != (images.shape[0],):
        raise ValueError(f"{prefix}: unexpected shapes {images.shape} / {labels.shape}")
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    x = ((x - MEAN) / STD).unsqueeze(1).contiguous()          # (N,1,28,28) float32
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


# ---------------------------------------------------------------- model

def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    )


def accuracy(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            out = model(x[i:i + batch])
            correct += int((out.argmax(1) == y[i:i + batch]).sum())
    model.train()
    return correct / x.shape[0]


def infer_rate(model, x, batch):
    model.eval()
    n = x.shape[0]
    with torch.no_grad():
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            model(x[i:i + batch])
        dt = time.perf_counter() - t0
    model.train()
    return n / dt


# ---------------------------------------------------------------- environment

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_snapshot():
    """(system busy seconds, steal seconds, this process's CPU seconds, wall) right now.

    Comparing two snapshots tells how much CPU other processes took while we ran:
    busy - own.  On a shared 2-core machine that is the main source of noise."""
    busy = steal = None
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal ...
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / _TICK
        steal = (v[7] if len(v) > 7 else 0) / _TICK
    except (OSError, ValueError, IndexError):
        pass
    return busy, steal, time.process_time(), time.perf_counter()


def contention(a, b):
    """CPU seconds used by other processes (and stolen by the hypervisor) between two
    snapshots, and this process's own CPU seconds."""
    own = b[2] - a[2]
    if a[0] is None or b[0] is None:
        return {"own_cpu_s": own}
    return {"own_cpu_s": own, "other_cpu_s": max(0.0, (b[0] - a[0]) - own),
            "steal_s": b[1] - a[1]}


def openblas_handle():
    """The libopenblas already mapped into this process (torch links it), if any."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
    except OSError:
        paths = set()
    for path in sorted(paths, key=lambda q: ("libopenblas" not in q, q)):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_num_threads  # noqa: B018 (probe the symbol)
            return path, lib
        except (OSError, AttributeError):
            continue
    return None, None


def loaded_math_libs():
    keep = ("blas", "lapack", "dnnl", "mkl", "gomp", "iomp", "torch_cpu")
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if any(k in os.path.basename(p) for k in keep))


def blas_config_lines():
    out = []
    for line in torch.__config__.show().splitlines():
        if "BLAS" not in line and "LAPACK" not in line and "MKL" not in line:
            continue
        if "Build settings" in line:   # one long line: keep the BLAS/LAPACK fields only
            out += [t.strip() for t in line.split(",") if "BLAS" in t or "LAPACK" in t]
        else:
            out.append(line.strip())
    return out


# ---------------------------------------------------------------- main

def main(argv):
    a = parse_args(argv)
    log_stream = sys.stderr if a.json else sys.stdout

    def log(*args):
        print(*args, file=log_stream, flush=True)

    try:
        torch.set_num_interop_threads(1)
    except RuntimeError as e:  # only possible if something ran inter-op work already
        log(f"warning: set_num_interop_threads(1) failed: {e}")
    torch.set_num_threads(a.threads)
    torch.backends.mkldnn.enabled = (a.mkldnn == "on")
    ob_path, ob = openblas_handle()
    ob_threads = ob_config = None
    if ob is not None:
        ob.openblas_set_num_threads(ctypes.c_int(a.blas_threads or a.threads))
        ob_threads = ob.openblas_get_num_threads()
        try:
            ob.openblas_get_config.restype = ctypes.c_char_p
            ob_config = ob.openblas_get_config().decode()
        except AttributeError:
            pass

    log(f"torch {torch.__version__}  python {platform.python_version()}  numpy {np.__version__}")
    log(f"threads: torch.get_num_threads()={torch.get_num_threads()}  "
        f"interop={torch.get_num_interop_threads()}  openblas={ob_threads}")
    log("BLAS (torch.__config__.show()): " + "; ".join(blas_config_lines()))
    log(f"OpenBLAS loaded: {ob_path}  config: {ob_config}")
    log("math libraries mapped: " + " ".join(loaded_math_libs()))
    log(f"mkldnn (oneDNN) enabled: {torch.backends.mkldnn.enabled}  "
        f"available: {torch.backends.mkldnn.is_available()}")
    log(f"init: {INIT_NOTE}")

    t_load = time.perf_counter()
    x_train, y_train = load_split(a.data, "train")
    x_test, y_test = load_split(a.data, "t10k")
    if a.limit_train is not None:
        x_train, y_train = x_train[:a.limit_train].contiguous(), y_train[:a.limit_train].contiguous()
    t_load = time.perf_counter() - t_load
    n = x_train.shape[0]
    log(f"data: {a.data}  train {tuple(x_train.shape)}  test {tuple(x_test.shape)}  "
        f"loaded+normalised in {t_load:.2f}s")

    torch.manual_seed(a.seed)
    model = lenet5()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    gen = torch.Generator().manual_seed(a.seed)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"LeNet-5: {nparams} parameters; SGD lr={a.lr} momentum={a.momentum} "
        f"weight_decay={a.weight_decay} batch={a.batch} epochs={a.epochs} seed={a.seed}")

    epochs = []
    model.train()
    for ep in range(1, a.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros(())
        nbatches = 0
        t_warm_end = None
        warm_images = 0
        snap0 = cpu_snapshot()
        t0 = time.perf_counter()
        for start in range(0, n, a.batch):
            idx = perm[start:start + a.batch]
            xb = x_train.index_select(0, idx)
            yb = y_train.index_select(0, idx)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
            nbatches += 1
            if nbatches == a.warmup:
                t_warm_end = time.perf_counter()
                warm_images = min(n, start + a.batch)
        t1 = time.perf_counter()
        snap1 = cpu_snapshot()
        dt = t1 - t0
        rec = {
            "epoch": ep,
            "seconds": dt,
            "images_per_s": n / dt,
            "train_loss": float(loss_sum) / nbatches,
        }
        rec.update(contention(snap0, snap1))
        if t_warm_end is not None and warm_images < n:
            rec["warmup_batches"] = a.warmup
            rec["warmup_seconds"] = t_warm_end - t0
            rec["steady_images_per_s"] = (n - warm_images) / (t1 - t_warm_end)
        rec["test_accuracy"] = accuracy(model, x_test, y_test, a.eval_batch)
        epochs.append(rec)
        steady = rec.get("steady_images_per_s")
        log(f"epoch {ep}: {dt:.2f}s  {rec['images_per_s']:.0f} img/s"
            + (f" (without first {a.warmup} batches: {steady:.0f} img/s, "
               f"warm-up {rec['warmup_seconds']:.3f}s)" if steady else "")
            + f"  train loss {rec['train_loss']:.4f}  test acc {rec['test_accuracy']:.4f}"
            + f"  [cpu s: own {rec['own_cpu_s']:.1f}"
            + (f", others {rec['other_cpu_s']:.1f}, steal {rec['steal_s']:.1f}"
               if "other_cpu_s" in rec else "") + "]")

    snap0 = cpu_snapshot()
    rates = [infer_rate(model, x_test, a.eval_batch) for _ in range(a.infer_repeats)]
    infer_cpu = contention(snap0, cpu_snapshot())
    infer = statistics.median(rates)
    log(f"inference: batch {a.eval_batch}, {a.infer_repeats} passes over {x_test.shape[0]} "
        f"test images: " + " ".join(f"{r:.0f}" for r in rates) + f" img/s, median {infer:.0f}"
        + f"  [cpu s: own {infer_cpu['own_cpu_s']:.1f}"
        + (f", others {infer_cpu['other_cpu_s']:.1f}" if "other_cpu_s" in infer_cpu else "") + "]")

    if a.json:
        result = {
            "peer": "torch",
            "torch_version": torch.__version__,
            "threads": a.threads,
            "torch_num_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "openblas_threads": ob_threads,
            "openblas_lib": ob_path,
            "openblas_config": ob_config,
            "blas_config": blas_config_lines(),
            "mkldnn": torch.backends.mkldnn.enabled,
            "init": INIT_NOTE,
            "batch": a.batch,
            "epochs": a.epochs,
            "lr": a.lr,
            "momentum": a.momentum,
            "weight_decay": a.weight_decay,
            "seed": a.seed,
            "train_images": n,
            "test_images": int(x_test.shape[0]),
            "per_epoch": epochs,
            "train_images_per_s": epochs[-1]["images_per_s"] if epochs else None,
            "train_images_per_s_steady": epochs[-1].get("steady_images_per_s") if epochs else None,
            "final_train_loss": epochs[-1]["train_loss"] if epochs else None,
            "test_accuracy": epochs[-1]["test_accuracy"] if epochs else accuracy(
                model, x_test, y_test, a.eval_batch),
            "eval_batch": a.eval_batch,
            "infer_images_per_s": infer,
            "infer_images_per_s_all": rates,
            "infer_cpu": infer_cpu,
            "train_other_cpu_s": sum(e.get("other_cpu_s", 0.0) for e in epochs),
            "train_seconds": sum(e["seconds"] for e in epochs),
        }
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
