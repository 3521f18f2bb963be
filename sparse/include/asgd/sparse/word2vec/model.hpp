// word2vec as an asgd Problem: skip-gram or CBOW, trained with negative
// sampling and/or hierarchical softmax (Mikolov et al. 2013; word2vec.c).
// One example is one sentence; the engine shards sentences over workers,
// decays the learning rate and lands every row update (Hogwild! by default).
//
// Parameters (one Layout, rows padded to whole cache lines):
//   "input"  [V x dim]  the word vectors (word2vec.c's syn0)
//   "output" [V x dim]  negative-sampling output vectors (syn1neg), if negative > 0
//   "hs"     [V-1 x dim] hierarchical-softmax inner nodes (syn1), if hs
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "asgd/engine/layout.hpp"
#include "asgd/engine/param_store.hpp"
#include "asgd/engine/problem.hpp"
#include "asgd/engine/row_ops.hpp"
#include "asgd/sparse/word2vec/corpus.hpp"
#include "asgd/sparse/word2vec/huffman.hpp"
#include "asgd/sparse/word2vec/sampling.hpp"
#include "asgd/sparse/word2vec/vocabulary.hpp"

namespace asgd::sparse::w2v {

struct ModelOptions {
  bool cbow = true;          // else skip-gram
  std::size_t dim = 100;     // -size
  std::size_t window = 5;    // -window (each side; shrunk at random per word)
  std::size_t negative = 5;  // -negative (0: none)
  bool hs = false;           // -hs
  double sample = 1e-3;      // -sample (0: no subsampling)
  // Skip-gram with negative sampling only: share one draw of negatives
  // across a word's whole context window and update the window as one small
  // matrix product (Intel's HogBatch, Ji et al. 2016): each output row is
  // read and written once per window instead of once per context word.
  // A training run (Word2VecOptions) turns it on wherever it applies (batch_applies): on text8 it trains 1.3-2x
  // faster than per-pair updates from two threads at the same analogy accuracy (bench/RESULTS.md).
  bool batch = false;
  // Throws InputError naming the flag (-size 0, -window 0, no objective...).
  void validate() const;
};

// Whether HogBatch can train a model of these options: skip-gram with negative sampling and no hierarchical
// softmax (the batched window has no tree to walk).
inline bool batch_applies(const ModelOptions& m) noexcept { return !m.cbow && !m.hs && m.negative > 0; }

// Sigmoid and log-sigmoid on [-kMaxExp, kMaxExp] by table, as word2vec.c.
class SigmoidTable {
 public:
  static constexpr float kMaxExp = 6.0f;
  static constexpr int kSize = 1024;
  SigmoidTable();
  float sigmoid(float x) const noexcept { return sigmoid_[index(x)]; }
  // -log(sigmoid(x)), the loss of a positive pair with score x.
  float neg_log_sigmoid(float x) const noexcept {
    return x <= -kMaxExp ? -x : x >= kMaxExp ? 0.0f : neg_log_[index(x)];
  }

 private:
  static int index(float x) noexcept {
    const int i = static_cast<int>((x + kMaxExp) * (kSize / (2 * kMaxExp)));
    return i < 0 ? 0 : (i >= kSize ? kSize - 1 : i);
  }
  std::array<float, kSize> sigmoid_{};
  std::array<float, kSize> neg_log_{};
};

class Word2Vec {
 public:
  // Keeps references to corpus and vocab, which must outlive the model.
  Word2Vec(const EncodedCorpus& corpus, const Vocabulary& vocab, ModelOptions options);

  Layout layout() const;
  // The layout of a model of `words` words with `options` (what layout() gives), without a corpus.
  static Layout layout_for(std::size_t words, const ModelOptions& options);
  const ModelOptions& options() const noexcept { return options_; }
  const Vocabulary& vocabulary() const noexcept { return *vocab_; }
  std::size_t num_examples() const noexcept { return corpus_->sentences(); }
  // Words per sentence on average (to turn examples/s into words/s).
  double words_per_example() const noexcept {
    return static_cast<double>(corpus_->tokens.size()) / static_cast<double>(num_examples());
  }
  // Sentences per engine step so that a step is about `words` words
  // (word2vec.c moves its rate every 10,000): per-step costs (clock, rate,
  // counters) stay small on corpora of short lines.
  std::size_t sentences_per_step(double words = 10000) const noexcept {
    return static_cast<std::size_t>(std::max(1.0, std::round(words / words_per_example())));
  }

  // word2vec.c's start: input rows uniform in [-0.5, 0.5) / dim, the rest 0.
  void initialize(ParamStore& store, std::uint64_t seed) const;

  // Trains on sentence i; returns the mean loss per (word, target) pair.
  template <class Sink>
  double gradient(std::size_t i, Sink& sink) const;

 private:
  struct Scratch {
    std::vector<std::uint32_t> sentence;
    std::vector<float> hidden, hidden_grad;
    std::vector<std::uint32_t> targets;
    // HogBatch: contexts x dim inputs and their gradients, targets x dim
    // outputs and theirs, contexts x targets scores.
    std::vector<float> inputs, input_grads, outputs, output_grads, scores;
  };
  Scratch& scratch() const;

  // HogBatch skip-gram for the word at `pos` with contexts [lo, hi].
  template <class Sink>
  double train_window_batched(std::size_t pos, std::size_t lo, std::size_t hi, Scratch& s, FastRng& rng, Sink& sink,
                              std::size_t& pairs) const;

  // Scores `hidden` against the word's targets, updates their rows and
  // accumulates d loss / d hidden into hidden_grad; returns the loss.
  template <class Sink>
  double train_targets(std::uint32_t word, Scratch& s, FastRng& rng, Sink& sink, std::size_t& pairs) const;

  const EncodedCorpus* corpus_;
  const Vocabulary* vocab_;
  ModelOptions options_;
  std::vector<float> keep_;  // subsampling keep probabilities
  AliasSampler negatives_;
  HuffmanTree tree_;
  SigmoidTable sigmoid_;
  std::size_t input_offset_ = 0, output_offset_ = 0, hs_offset_ = 0, stride_ = 0;
};

static_assert(Problem<Word2Vec>);

// ---------------------------------------------------------------------------

template <class Sink>
double Word2Vec::train_targets(std::uint32_t word, Scratch& s, FastRng& rng, Sink& sink, std::size_t& pairs) const {
  const std::size_t dim = options_.dim;
  float* const hidden = s.hidden.data();
  float* const grad = s.hidden_grad.data();
  double loss = 0;
  if (options_.hs) {
    const auto code = tree_.code(word);
    const auto points = tree_.points(word);
    for (std::size_t d = 0; d < code.size(); ++d) {
      const std::size_t offset = hs_offset_ + points[d] * stride_;
      const float f = sink.dot(hidden, offset, dim);
      // code 1 means "left": the target of sigmoid is 1 - code.
      const float label = 1.0f - static_cast<float>(code[d]);
      loss += sigmoid_.neg_log_sigmoid(label > 0 ? f : -f);
      ++pairs;
      if (f <= -SigmoidTable::kMaxExp || f >= SigmoidTable::kMaxExp) continue;
      const float g = label - sigmoid_.sigmoid(f);
      sink.add_row_to_then_gradient(g, offset, grad, hidden, dim, -g);
    }
  }
  if (options_.negative > 0) {
    // Draw the negatives first and prefetch their rows: the rows are the
    // cache misses of this loop.
    std::uint32_t* targets = s.targets.data();
    targets[0] = word;
    sink.prefetch(output_offset_ + word * stride_, dim);
    for (std::size_t d = 1; d <= options_.negative; ++d) {
      targets[d] = negatives_.sample(rng.next());
      sink.prefetch(output_offset_ + targets[d] * stride_, dim);
    }
    for (std::size_t d = 0; d <= options_.negative; ++d) {
      if (d > 0 && targets[d] == word) continue;
      const std::size_t offset = output_offset_ + targets[d] * stride_;
      const float f = sink.dot(hidden, offset, dim);
      const float label = d == 0 ? 1.0f : 0.0f;
      loss += sigmoid_.neg_log_sigmoid(d == 0 ? f : -f);
      ++pairs;
      float g;
      if (f > SigmoidTable::kMaxExp) {
        g = label - 1.0f;
      } else if (f < -SigmoidTable::kMaxExp) {
        g = label;
      } else {
        g = label - sigmoid_.sigmoid(f);
      }
      if (g == 0.0f) continue;
      // The output row is read in place, for the dot and again here (word2vec.c's order): a copy of it first
      // cost a sixth of the loop's instructions.
      sink.add_row_to_then_gradient(g, offset, grad, hidden, dim, -g);  // the engine multiplies by the rate
    }
  }
  return loss;
}

template <class Sink>
double Word2Vec::train_window_batched(std::size_t pos, std::size_t lo, std::size_t hi, Scratch& s, FastRng& rng,
                                      Sink& sink, std::size_t& pairs) const {
  const std::size_t dim = options_.dim;
  const std::uint32_t word = s.sentence[pos];
  if (hi == lo) return 0.0;  // no context word: nothing to learn, and no zero writes racing others
  // Targets: the word, then negatives (a negative equal to the word is dropped).
  std::uint32_t* targets = s.targets.data();
  std::size_t n_targets = 0;
  targets[n_targets++] = word;
  // Every row the window reads and then writes is fetched for writing first: a frequent word's row that the other
  // core wrote last then comes once, owned (UpdateSink::prefetch).
  sink.prefetch(output_offset_ + word * stride_, dim);
  for (std::size_t c = lo; c <= hi; ++c)
    if (c != pos) sink.prefetch(input_offset_ + s.sentence[c] * stride_, dim);
  for (std::size_t d = 0; d < options_.negative; ++d) {
    const std::uint32_t t = negatives_.sample(rng.next());
    if (t == word) continue;
    targets[n_targets++] = t;
    sink.prefetch(output_offset_ + t * stride_, dim);
  }
  std::size_t n_inputs = 0;
  for (std::size_t c = lo; c <= hi; ++c) {
    if (c == pos) continue;
    sink.read(input_offset_ + s.sentence[c] * stride_, s.inputs.data() + n_inputs * dim, dim);
    ++n_inputs;
  }
  for (std::size_t t = 0; t < n_targets; ++t) sink.read(output_offset_ + targets[t] * stride_, s.outputs.data() + t * dim, dim);
  // Scores and the loss gradient d loss / d score = sigmoid(score) - label.
  double loss = 0;
  float* const scores = s.scores.data();
  for (std::size_t b = 0; b < n_inputs; ++b) {
    for (std::size_t t = 0; t < n_targets; ++t) {
      const float f = rows::dot(s.inputs.data() + b * dim, s.outputs.data() + t * dim, dim);
      const float label = t == 0 ? 1.0f : 0.0f;
      loss += sigmoid_.neg_log_sigmoid(t == 0 ? f : -f);
      const float g = f > SigmoidTable::kMaxExp ? label - 1.0f : f < -SigmoidTable::kMaxExp ? label : label - sigmoid_.sigmoid(f);
      scores[b * n_targets + t] = g;
    }
  }
  pairs += n_inputs * n_targets;
  // Two small products: input grads = G O, output grads = G^T H.
  std::fill(s.input_grads.begin(), s.input_grads.begin() + static_cast<std::ptrdiff_t>(n_inputs * dim), 0.0f);
  std::fill(s.output_grads.begin(), s.output_grads.begin() + static_cast<std::ptrdiff_t>(n_targets * dim), 0.0f);
  for (std::size_t b = 0; b < n_inputs; ++b) {
    for (std::size_t t = 0; t < n_targets; ++t) {
      const float g = scores[b * n_targets + t];
      if (g == 0.0f) continue;
      rows::axpy(g, s.outputs.data() + t * dim, s.input_grads.data() + b * dim, dim);
      rows::axpy(g, s.inputs.data() + b * dim, s.output_grads.data() + t * dim, dim);
    }
  }
  for (std::size_t t = 0; t < n_targets; ++t) {
    sink.add_gradient(output_offset_ + targets[t] * stride_, s.output_grads.data() + t * dim, dim, -1.0f);
  }
  std::size_t b = 0;
  for (std::size_t c = lo; c <= hi; ++c) {
    if (c == pos) continue;
    sink.add_gradient(input_offset_ + s.sentence[c] * stride_, s.input_grads.data() + b * dim, dim, -1.0f);
    ++b;
  }
  return loss;
}

template <class Sink>
double Word2Vec::gradient(std::size_t i, Sink& sink) const {
  const std::size_t dim = options_.dim;
  Scratch& s = scratch();
  FastRng rng(FastRng::mix(sink.seed(), sink.epoch(), i));

  // Frequent-word subsampling, fresh every epoch.
  const std::uint32_t* words = corpus_->tokens.data();
  std::size_t len = 0;
  for (std::uint64_t k = corpus_->sentence_begin[i]; k < corpus_->sentence_begin[i + 1]; ++k) {
    const std::uint32_t w = words[k];
    if (keep_[w] >= 1.0f || rng.uniform() < keep_[w]) s.sentence[len++] = w;
  }

  double loss = 0;
  std::size_t pairs = 0;
  const std::size_t window = options_.window;
  float* const hidden = s.hidden.data();
  float* const grad = s.hidden_grad.data();
  for (std::size_t pos = 0; pos < len; ++pos) {
    const std::uint32_t word = s.sentence[pos];
    const std::size_t reach = window - rng.below(static_cast<std::uint32_t>(window));  // 1..window
    const std::size_t lo = pos >= reach ? pos - reach : 0;
    const std::size_t hi = std::min(len - 1, pos + reach);
    if (options_.cbow) {
      std::fill(hidden, hidden + dim, 0.0f);
      for (std::size_t c = lo; c <= hi; ++c)
        if (c != pos) sink.prefetch(input_offset_ + s.sentence[c] * stride_, dim);  // read, then written
      std::size_t context = 0;
      for (std::size_t c = lo; c <= hi; ++c) {
        if (c == pos) continue;
        sink.add_row_to(1.0f, input_offset_ + s.sentence[c] * stride_, hidden, dim);
        ++context;
      }
      if (context == 0) continue;
      const float inv = 1.0f / static_cast<float>(context);
      for (std::size_t k = 0; k < dim; ++k) hidden[k] *= inv;
      std::fill(grad, grad + dim, 0.0f);
      loss += train_targets(word, s, rng, sink, pairs);
      for (std::size_t c = lo; c <= hi; ++c) {
        if (c != pos) sink.add_gradient(input_offset_ + s.sentence[c] * stride_, grad, dim, -1.0f);
      }
    } else if (options_.batch) {
      loss += train_window_batched(pos, lo, hi, s, rng, sink, pairs);
    } else {
      for (std::size_t c = lo; c <= hi; ++c) {
        if (c == pos) continue;
        // word2vec.c's skip-gram: the context word's vector predicts `word`.
        const std::size_t in = input_offset_ + s.sentence[c] * stride_;
        sink.prefetch(in, dim);  // read, then written
        sink.read(in, hidden, dim);
        std::fill(grad, grad + dim, 0.0f);
        loss += train_targets(word, s, rng, sink, pairs);
        sink.add_gradient(in, grad, dim, -1.0f);
      }
    }
  }
  return pairs ? loss / static_cast<double>(pairs) : 0.0;
}

}  // namespace asgd::sparse::w2v
