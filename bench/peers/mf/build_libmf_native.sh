#!/usr/bin/env bash
# Builds LIBMF from its own source for this machine, as its Makefile offers: -O3 -march=native with AVX
# (-DUSEAVX -mavx) and OpenMP, into OUT_DIR/libmf.so.2 (the source tree is copied, not written to). The npm
# package's library (run.sh's default peer) is a portable SSE build; this one is the harder peer.
# SRC_DIR: a LIBMF checkout (https://github.com/cjlin1/libmf; its mf.cpp, mf.h and Makefile).
# Usage: build_libmf_native.sh SRC_DIR OUT_DIR   (prints the library's path)
set -euo pipefail
src="$1" out="$2"
[[ -s "$src/mf.cpp" && -s "$src/mf.h" ]] || { echo "build_libmf_native.sh: $src holds no LIBMF source" >&2; exit 2; }
mkdir -p "$out"
cp "$src/mf.cpp" "$src/mf.h" "$out/"
# libmf_run.py loads the data with LIBMF's own reader through ctypes, which needs a C signature: the npm build
# exports mf_read_problem(const char*); upstream's read_problem takes a std::string. A two-line shim gives it.
cat > "$out/read_shim.cpp" <<'CPP'
#include "mf.h"
extern "C" mf::mf_problem mf_read_problem(const char* path) { return mf::read_problem(path); }
CPP
flags=(-Wall -O3 -pthread -std=c++0x -march=native -mavx -fopenmp -DUSEAVX -DUSEOMP)
g++ "${flags[@]}" -c -fPIC -o "$out/mf.o" "$out/mf.cpp" >&2
g++ "${flags[@]}" -c -fPIC -I "$out" -o "$out/read_shim.o" "$out/read_shim.cpp" >&2
g++ -shared -fopenmp -Wl,-soname,libmf.so.2 -o "$out/libmf.so.2" "$out/mf.o" "$out/read_shim.o" >&2
echo "$out/libmf.so.2"
