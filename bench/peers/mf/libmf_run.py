#!/usr/bin/env python3
"""One LIBMF training run through its C API (ctypes), timed the way run.sh
times ours: LIBMF's own reader (mf_read_problem) for loading, mf_train for
training, calc_rmse on the test file.

Usage: libmf_run.py LIBMF_SO TRAIN TEST -k K -t ITERS -s THREADS [--bins B]
                    [-r ETA] [--l2 LAMBDA]
Prints one line of key=value pairs: load_s, train_s, test_rmse, m, n, nnz.
TRAIN and TEST are LIBMF text ("u v r", ids from 0). LIBMF's defaults
otherwise (squared loss, no NMF, L1 0, its per-row AdaGrad), quiet.
Standard library only.
"""
import argparse
import ctypes
import sys
import time


class Node(ctypes.Structure):
    _fields_ = [("u", ctypes.c_int), ("v", ctypes.c_int), ("r", ctypes.c_float)]


class Problem(ctypes.Structure):
    _fields_ = [("m", ctypes.c_int), ("n", ctypes.c_int), ("nnz", ctypes.c_longlong),
                ("R", ctypes.POINTER(Node))]


class Parameter(ctypes.Structure):
    # mf.h's mf_parameter, field for field.
    _fields_ = [("fun", ctypes.c_int), ("k", ctypes.c_int), ("nr_threads", ctypes.c_int),
                ("nr_bins", ctypes.c_int), ("nr_iters", ctypes.c_int),
                ("lambda_p1", ctypes.c_float), ("lambda_p2", ctypes.c_float),
                ("lambda_q1", ctypes.c_float), ("lambda_q2", ctypes.c_float),
                ("eta", ctypes.c_float), ("alpha", ctypes.c_float), ("c", ctypes.c_float),
                ("do_nmf", ctypes.c_bool), ("quiet", ctypes.c_bool), ("copy_data", ctypes.c_bool)]


class Model(ctypes.Structure):
    _fields_ = [("fun", ctypes.c_int), ("m", ctypes.c_int), ("n", ctypes.c_int), ("k", ctypes.c_int),
                ("b", ctypes.c_float), ("P", ctypes.POINTER(ctypes.c_float)),
                ("Q", ctypes.POINTER(ctypes.c_float))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("-k", type=int, required=True)
    ap.add_argument("-t", type=int, required=True)
    ap.add_argument("-s", type=int, required=True)
    ap.add_argument("--bins", type=int, default=0, help="0: LIBMF's default (20, at least 2 x threads + 1)")
    ap.add_argument("-r", type=float, default=None, help="eta (default: LIBMF's, 0.1)")
    ap.add_argument("--l2", type=float, default=None, help="lambda_p2 = lambda_q2 (default: LIBMF's, 0.1)")
    a = ap.parse_args()

    lib = ctypes.CDLL(a.lib)
    lib.mf_get_default_param.restype = Parameter
    lib.mf_read_problem.restype = Problem
    lib.mf_read_problem.argtypes = [ctypes.c_char_p]
    lib.mf_train.restype = ctypes.POINTER(Model)
    lib.mf_train.argtypes = [ctypes.POINTER(Problem), Parameter]
    lib.calc_rmse.restype = ctypes.c_double
    lib.calc_rmse.argtypes = [ctypes.POINTER(Problem), ctypes.POINTER(Model)]
    lib.mf_destroy_model.argtypes = [ctypes.POINTER(ctypes.POINTER(Model))]

    p = lib.mf_get_default_param()
    p.k, p.nr_iters, p.nr_threads = a.k, a.t, a.s
    if a.bins:
        p.nr_bins = a.bins
    p.nr_bins = max(p.nr_bins, 2 * p.nr_threads + 1)  # LIBMF refuses fewer
    if a.r is not None:
        p.eta = a.r
    if a.l2 is not None:
        p.lambda_p2 = p.lambda_q2 = a.l2
    p.quiet = True
    p.copy_data = False  # train on the problem as read (it is not used again)

    start = time.perf_counter()
    train = lib.mf_read_problem(a.train.encode())
    test = lib.mf_read_problem(a.test.encode())
    load = time.perf_counter() - start
    if train.nnz == 0:
        sys.exit(f"libmf_run.py: {a.train}: LIBMF read no ratings")
    start = time.perf_counter()
    model = lib.mf_train(ctypes.byref(train), p)
    train_s = time.perf_counter() - start
    if not model:
        sys.exit("libmf_run.py: mf_train failed")
    rmse = lib.calc_rmse(ctypes.byref(test), model)
    print(f"load_s={load:.3f} train_s={train_s:.3f} test_rmse={rmse:.4f} m={train.m} n={train.n} "
          f"nnz={train.nnz} bins={p.nr_bins} eta={p.eta:g} l2={p.lambda_p2:g}")
    lib.mf_destroy_model(ctypes.byref(model))


if __name__ == "__main__":
    main()
