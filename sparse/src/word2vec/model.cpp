#include "asgd/sparse/word2vec/model.hpp"

#include <fmt/format.h>

#include "asgd/engine/consistency.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::sparse::w2v {

void ModelOptions::validate() const {
  if (dim == 0 || dim > 10000) throw InputError(fmt::format("ModelOptions::dim {}: expected 1 to 10000", dim));
  if (window == 0 || window > 1000) throw InputError(fmt::format("ModelOptions::window {}: expected 1 to 1000", window));
  if (negative > 1000) throw InputError(fmt::format("ModelOptions::negative {}: expected 0 to 1000", negative));
  if (negative == 0 && !hs) throw InputError("ModelOptions::negative 0 without ModelOptions::hs 1: nothing to train (choose one or both)");
  if (!(sample >= 0) || !std::isfinite(sample)) throw InputError(fmt::format("ModelOptions::sample {}: expected >= 0", sample));
  if (batch && !batch_applies(*this)) {
    throw InputError("ModelOptions::batch 1 (HogBatch) needs skip-gram with negative sampling: ModelOptions::cbow 0 "
                     "ModelOptions::hs 0 ModelOptions::negative N");
  }
}

SigmoidTable::SigmoidTable() {
  for (int i = 0; i < kSize; ++i) {
    // Centre of bucket i.
    const double x = (static_cast<double>(i) + 0.5) * (2.0 * kMaxExp / kSize) - kMaxExp;
    sigmoid_[i] = static_cast<float>(1.0 / (1.0 + std::exp(-x)));
    neg_log_[i] = static_cast<float>(std::log1p(std::exp(-x)));
  }
}

Word2Vec::Word2Vec(const EncodedCorpus& corpus, const Vocabulary& vocab, ModelOptions options)
    : corpus_(&corpus), vocab_(&vocab), options_(options) {
  options_.validate();
  if (corpus.sentences() == 0) throw InputError("word2vec: the corpus has no sentences");
  // The hot loop trusts these; EncodedCorpus is a plain struct anyone can fill.
  if (corpus.sentence_begin.front() != 0 || corpus.sentence_begin.back() != corpus.tokens.size()) {
    throw InputError("word2vec: sentence offsets do not cover the tokens");
  }
  for (std::size_t i = 0; i < corpus.sentences(); ++i) {
    if (corpus.sentence_begin[i + 1] < corpus.sentence_begin[i] ||
        corpus.sentence_begin[i + 1] - corpus.sentence_begin[i] > kMaxSentence) {
      throw InputError(fmt::format("word2vec: sentence {} is longer than {} words or its offsets decrease", i,
                                   kMaxSentence));
    }
  }
  for (const std::uint32_t id : corpus.tokens) {
    if (id >= vocab.size()) throw InputError(fmt::format("word2vec: word id {} is not in the vocabulary", id));
  }
  keep_ = vocab.keep_probabilities(options_.sample);
  if (options_.negative > 0) negatives_ = AliasSampler::unigram(vocab.counts(), 0.75);
  if (options_.hs) tree_ = HuffmanTree(vocab.counts());
  const Layout l = layout();
  input_offset_ = l["input"].offset;
  stride_ = l["input"].row_stride;
  if (options_.negative > 0) output_offset_ = l["output"].offset;
  if (options_.hs) hs_offset_ = l["hs"].offset;
}

Layout Word2Vec::layout() const { return layout_for(vocab_->size(), options_); }

Layout Word2Vec::layout_for(std::size_t v, const ModelOptions& options) {
  Layout l;
  l.add("input", {v, options.dim}, RowPadding::cache_line);
  if (options.negative > 0) l.add("output", {v, options.dim}, RowPadding::cache_line);
  if (options.hs) l.add("hs", {std::max<std::size_t>(1, v - 1), options.dim}, RowPadding::cache_line);
  return l;
}

void Word2Vec::initialize(ParamStore& store, std::uint64_t seed) const {
  const Tensor& in = store.layout()["input"];
  FastRng rng(FastRng::mix(seed, 0x5eed, 0));
  float* data = store.data();
  const float scale = 1.0f / static_cast<float>(options_.dim);
  for (std::size_t r = 0; r < in.rows; ++r) {
    for (std::size_t c = 0; c < in.cols; ++c) store_param(data[in.at(r, c)], (rng.uniform() - 0.5f) * scale);
  }
}

Word2Vec::Scratch& Word2Vec::scratch() const {
  // One per thread, grown once: the hot loop allocates nothing.
  thread_local Scratch s;
  const std::size_t dim = options_.dim, contexts = 2 * options_.window, targets = options_.negative + 1;
  auto grow = [](auto& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(s.hidden, dim);
  grow(s.hidden_grad, dim);
  grow(s.sentence, kMaxSentence);
  grow(s.targets, targets);
  if (options_.batch) {
    grow(s.inputs, contexts * dim);
    grow(s.input_grads, contexts * dim);
    grow(s.outputs, targets * dim);
    grow(s.output_grads, targets * dim);
    grow(s.scores, contexts * targets);
  }
  return s;
}

}  // namespace asgd::sparse::w2v
