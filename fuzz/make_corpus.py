#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, fuzz/corpus/<target>/, from the test fixtures.

The text seeds are inputs the unit tests under tests/ write (copied here, a handful per reader: good files and
the bad ones the tests refuse). The binary seeds are made as the tests make theirs (IDX, binary vectors, a
segment header) or, for model files and checkpoints, written by `asgd` itself on tiny data:

    python3 fuzz/make_corpus.py --asgd build/apps/asgd

Without --asgd the seeds that need it are left as they are. Seeds stay small (a few KB): libFuzzer's
-max_len defaults to the largest seed.
"""

import argparse
import gzip
import json
import os
import pathlib
import random
import shutil
import struct
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def le_floats(*values):
    return struct.pack("<%df" % len(values), *values)


def gzip_of(data):
    return gzip.compress(data, mtime=0)


TEXT_SEEDS = {
    "libsvm": {  # tests/sparse/test_libsvm.cpp, test_gzip_inputs.cpp
        "basic": b"+1 1:0.5 3:-2 7:1e-3\n-1 2:+4\n0 0:1\n1\n1.0 5:7.25\n",
        "comments_crlf": b"# header comment\r\n\r\n   \t \n1 1:2 # trailing comment 9:9\r\n\t-1\t4:1.5 \t 6:2\t\r\n#\n",
        "bom": b"\xef\xbb\xbf+1 1:2\n-1 3:4\n",
        "largest_id": b"1 0:1 2147483647:2\n",
        "unsorted": b"1 9:0.9 2:0.2 5:0.5\n-1 3:3 1:1\n",
        "repeated_id": b"1 5:1 9:1 2:1 5:2 2:7\n",
        "bad_value": b"1 4:1e39\n",
        "denormals": b"1 1:1e-50 2:-1e-400 3:1e-40\n",
        "gzip": gzip_of(b"+1 1:0.5 3:2\n-1 2:1\n"),
    },
    "ratings": {  # tests/sparse/test_mf.cpp: every format, shared by the four ratings targets
        "udata": b"196\t242\t3\t881250949\n186\t302\t3\t891717742\r\n\n",
        "dat": b"1::1193::5::978300760\n1::661::3::978302109",
        "csv": b"userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.5,964981247\n",
        "libmf": b"alice item-7 2.5\n  bob\titem-7   4\n",
        "csv_spaced": b"user, item, rating\nu1, i2, 4\nu1,i2 ,3.5\n",
        "csv_bom": b"\xef\xbb\xbfuser,item,stars\na,x,4\nb,y,2.5\n",
        "tsv_header_float_time": b"user\titem\trating\ttime\na\tx\t4\t978300760.0\nb\ty\t2\t1.2e9\n",
        "missing_rating": b"1,10,,100\n1,11,4,101\n",
        "gzip": gzip_of(b"u1 i1 4\nu2 i2 3.5\nu1 i2 2\n"),
    },
    "corpus": {  # tests/sparse/test_w2v_training.cpp, test_gzip_inputs.cpp
        "lines": b"b a c a b a\n  d\td b\r\n\n",
        "sentences": b"the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n",
        "long_line": b" ".join(b"w%d" % (i % 37) for i in range(1100)) + b"\n",
        "long_token": b"a " + b"x" * 1100 + b" b\n",
        "gzip": gzip_of(b"".join(b"w%d%s" % (i % 97, b"\n" if i % 13 == 0 else b" ") for i in range(400))),
    },
    "vocabulary": {  # tests/sparse/test_w2v_training.cpp, test_gzip_inputs.cpp, test_w2v_resume.cpp
        "saved": b"</s> 0\nthe 5\nof 3\n",
        "unsorted": b"a 9\nb 9\nc 12\n",
        "whitespace": b"</s> 0\nthe 5\nx\x0by 2\nof 3\r\n",
        "zero_count": b"a 3\nb 0\n",
        "gzip": gzip_of(b"</s> 0\nthe 5\nof 3\n"),
    },
    "vectors": {  # tests/sparse/test_w2v_embeddings.cpp
        "text": b"2 3\nthe 1 2.5 -0.3\nof 4 5 6\n",
        "text_crlf_tabs": b"2 3\r\nthe\t1 +2.5 -3e-1\r\nof 4 5 6",
        "text_bom": b"\xef\xbb\xbf2 3\nthe 1 2.5 -0.3\nof 4 5 6\n",
        "binary": b"2 2\nthe " + le_floats(1.0, -2.5) + b"\nof " + le_floats(0.125, 3.0) + b"\n",
        "binary_gensim": b"2 2\nthe " + le_floats(1.0, 2.0) + b"of " + le_floats(3.0, 4.0),
        "empty": b"0 100\n",
        "junk": b"3 1\na 1\nb 2\nthis is not a vector\n",
        "huge_header": b"100000 16000000\nw 1\n",
        "gzip": gzip_of(b"2 3\nthe 1 2 3\nof 4 5 6\n"),
    },
}


def idx_images(n, rows, cols, seed=1):
    rng = random.Random(seed)
    return struct.pack(">IIII", 0x803, n, rows, cols) + bytes(rng.randrange(256) for _ in range(n * rows * cols))


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def idx_pair(images, labels):  # fuzz/idx.cpp: u32 image length, images, labels
    return struct.pack("<I", len(images)) + images + labels


def idx_seeds():  # tests/dense/test_mnist.cpp: images of 2x3, 28x28, gzip, short files
    three = idx_images(3, 2, 3)
    return {
        "small": idx_pair(three, idx_labels([1, 2, 9])),
        "digits": idx_pair(idx_images(2, 28, 28), idx_labels([7, 0])),
        "gzip": idx_pair(gzip_of(three), gzip_of(idx_labels([1, 2, 9]))),
        "empty": idx_pair(struct.pack(">IIII", 0x803, 0, 28, 28), idx_labels([])),
        "short_images": idx_pair(three[:-2], idx_labels([1, 2, 9])),
        "bad_label": idx_pair(three, idx_labels([1, 12, 9])),
    }


# engine/src/segment_format.hpp: the header's fields up to the layout text.
SEGMENT_FIXED = struct.Struct("<QIIQQQQiIQ")
SEGMENT_TEXT_AT = SEGMENT_FIXED.size + 64 * 4 + 64 * 8
SEGMENT_MAGIC = 0x4D52415044475341
HEADER_BYTES = 16384


def segment_seed(layout_text, layout_hash, elements, settings, state=1, writers=(), object_bytes=None):
    """fuzz/segment_header.cpp's input: the object's size (u64), then the header up to the end of its texts."""
    fixed = SEGMENT_FIXED.pack(SEGMENT_MAGIC, 3, HEADER_BYTES, layout_hash, elements, len(layout_text),
                               len(settings), 1, state, 0)
    pids = [0] * 64
    for i, pid in enumerate(writers):
        pids[i] = pid
    header = fixed + struct.pack("<64i", *pids) + struct.pack("<64Q", *([0] * 64)) + layout_text + settings
    size = HEADER_BYTES + 4 * elements if object_bytes is None else object_bytes
    return struct.pack("<Q", size) + header


def checkpoint_parts(data):
    """The header fields, layout text and metadata of a checkpoint file (engine/checkpoint.hpp)."""
    fields = struct.unpack("<8sIIQQQQQQQQ", data[:80])
    text, meta = fields[9], fields[10]
    return fields, data[80:80 + text], data[80 + text:80 + text + meta]


def run(asgd, cwd, *args):
    subprocess.run([asgd, *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def model_seeds(asgd):
    """Files `asgd` writes on tiny data: {target: {name: bytes}}."""
    seeds = {"checkpoint": {}, "mf_model": {}, "linear_model": {}, "lenet_model": {}, "w2v_checkpoint": {},
             "segment_header": {}}
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        (d / "lin.svm").write_bytes(TEXT_SEEDS["libsvm"]["basic"] + b"1 2:1 8:3\n-1 1:1 4:2\n")
        run(asgd, d, "linear", "train", "--data", "lin.svm", "--model", "lin.model", "--epochs", "1", "-q",
            "--workers", "1")
        run(asgd, d, "linear", "train", "--data", "lin.svm", "--checkpoint", "lin.ckpt", "--epochs", "1", "-q",
            "--workers", "1", "--adagrad", "--loss", "hinge")
        (d / "r.txt").write_bytes(b"a x 5\na y 3\nb x 4\nb y 1\nc y 2\nd z 3\n")
        run(asgd, d, "mf", "train", "r.txt", "mf.model", "-k", "2", "-t", "1", "-s", "1")
        run(asgd, d, "mf", "train", "r.txt", "bpr.model", "-k", "2", "-t", "1", "-s", "1", "--loss", "bpr",
            "--adagrad")
        (d / "c.txt").write_bytes(TEXT_SEEDS["corpus"]["sentences"])
        run(asgd, d, "w2v", "-train", "c.txt", "-output", "v.txt", "-size", "4", "-min-count", "1", "-iter", "1",
            "-threads", "1", "-checkpoint", "w.ckpt")
        (d / "mnist").mkdir()
        for prefix, n in (("train", 4), ("t10k", 2)):
            (d / "mnist" / f"{prefix}-images-idx3-ubyte").write_bytes(idx_images(n, 28, 28))
            (d / "mnist" / f"{prefix}-labels-idx1-ubyte").write_bytes(idx_labels(list(range(n))))
        run(asgd, d, "cnn", "train", "--data", "mnist", "--epochs", "2", "--until-epoch", "1", "--checkpoint",
            "lenet.ckpt", "--workers", "1")
        files = {name: (d / name).read_bytes() for name in
                 ("lin.model", "lin.ckpt", "mf.model", "bpr.model", "w.ckpt", "lenet.ckpt")}

    for name in ("lin.model", "lin.ckpt", "mf.model", "bpr.model", "w.ckpt"):
        seeds["checkpoint"][name.replace(".", "_")] = files[name]
    seeds["linear_model"] = {"model": files["lin.model"], "adagrad_checkpoint": files["lin.ckpt"]}
    seeds["mf_model"] = {"squared": files["mf.model"], "bpr": files["bpr.model"]}
    _, _, w2v_meta = checkpoint_parts(files["w.ckpt"])
    seeds["w2v_checkpoint"] = {"metadata": w2v_meta}
    # fuzz/lenet_model.cpp's input: a choice byte (1: a momentum buffer of the parameters' size), the metadata.
    _, _, lenet_meta = checkpoint_parts(files["lenet.ckpt"])
    seeds["lenet_model"] = {"checkpoint": b"\x01" + lenet_meta, "model_no_momentum": b"\x00" + lenet_meta,
                            "bare_kind": b"\x00asgd-cnn lenet5 v1"}
    # Segment headers for the linear model's and mf model's layouts: ready, one being made, a dead writer, short.
    for name in ("lin.model", "mf.model"):
        fields, text, _ = checkpoint_parts(files[name])
        stem = name.split(".")[0]
        settings = json.dumps({"loss": "logistic", "l2": "0.0001"}, separators=(",", ":")).encode()
        seeds["segment_header"][stem + "_ready"] = segment_seed(text, fields[3], fields[4], settings, writers=[1])
        seeds["segment_header"][stem + "_initialising"] = segment_seed(text, fields[3], fields[4], b"", state=0)
        seeds["segment_header"][stem + "_dead_writer"] = segment_seed(text, fields[3], fields[4], b"",
                                                                      writers=[1, 2 ** 31 - 2])
        seeds["segment_header"][stem + "_truncated"] = segment_seed(text, fields[3], fields[4], b"",
                                                                    object_bytes=HEADER_BYTES + 8)
    return seeds


def write(target, seeds):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (folder / name).write_bytes(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asgd", help="the asgd command, to write the model and checkpoint seeds")
    args = parser.parse_args()
    for target in ("libsvm", "corpus", "vocabulary", "vectors"):
        write(target, TEXT_SEEDS[target])
    for fmt in ("udata", "dat", "csv", "libmf"):
        write("ratings_" + fmt, TEXT_SEEDS["ratings"])
    write("idx", idx_seeds())
    if args.asgd:
        asgd = shutil.which(args.asgd) or os.path.abspath(args.asgd)
        for target, seeds in model_seeds(asgd).items():
            write(target, seeds)


if __name__ == "__main__":
    main()
