#include <algorithm>
#include <fmt/format.h>

#include "asgd/dense/network.hpp"
#include "asgd/engine/errors.hpp"

namespace asgd::dense {

Network& Network::add(std::unique_ptr<Layer> layer) {
  if (shapes_.empty()) {
    shapes_.push_back(input_);
    flat_.push_back(input_.h == 1 && input_.w == 1);
  }
  const Shape in = shapes_.back();
  const bool flat = flat_.back();
  if (layer->takes() == Layer::Takes::flat && !flat)
    throw InputError(fmt::format("{} after a {}x{}x{} image: flatten first", layer->describe(), in.c, in.h, in.w));
  if (layer->takes() == Layer::Takes::spatial && flat)
    throw InputError(fmt::format("{} needs an image, not a vector of {} features", layer->describe(), in.size()));
  const Shape out = layer->output(in);
  layer->declare(layout_, fmt::format("l{}", layers_.size()), in);
  shapes_.push_back(out);
  flat_.push_back(layer->makes_flat(flat));
  layers_.push_back(std::move(layer));
  return *this;
}

std::size_t Network::num_params() const noexcept {
  std::size_t n = 0;
  for (const auto& t : layout_.tensors()) n += t.elements();
  return n;
}

std::string Network::describe(bool gpu) const {
  std::string s;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::string layer = gpu ? layers_[i]->describe_on_gpu() : layers_[i]->describe();
    s += fmt::format("{}{} -> {}x{}x{}", i ? ", " : "", layer, shapes_[i + 1].c, shapes_[i + 1].h, shapes_[i + 1].w);
  }
  return s + fmt::format(" ({} parameters)", num_params());
}

std::vector<Network::Block> Network::blocks() const {
  std::vector<Block> out;
  for (const auto& t : layout_.tensors()) out.push_back({t.name, t.offset, t.span()});
  return out;
}

std::vector<LayerSpec> Network::specs() const {
  std::vector<LayerSpec> out;
  out.reserve(layers_.size());
  for (const auto& layer : layers_) out.push_back(layer->spec());
  return out;
}

Network::Flops Network::flops_per_sample() const {
  Flops f;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec s = layers_[i]->spec();
    double mads = 0;
    if (s.kind == LayerSpec::Kind::conv2d)
      mads = static_cast<double>(s.out.c) * static_cast<double>(s.in.c * s.kernel * s.kernel) *
             static_cast<double>(s.out.h * s.out.w);
    else if (s.kind == LayerSpec::Kind::linear)
      mads = static_cast<double>(s.in.size()) * static_cast<double>(s.out.size());
    f.forward += 2 * mads;
    // backward: the parameter gradient always, the input gradient past layer 0
    f.training += 2 * mads * (i == 0 ? 2 : 3);
  }
  return f;
}

void Network::initialize(std::span<float> params, std::uint64_t seed) const {
  if (params.size() < layout_.size())
    throw InputError(fmt::format("initialize: {} floats for a layout of {}", params.size(), layout_.size()));
  std::fill(params.begin(), params.end(), 0.0f);
  std::mt19937_64 rng(seed);
  std::size_t last = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->has_params()) last = i;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->initialize(params.data(), rng, i == last);
}

Workspace Network::workspace(std::size_t capacity) const {
  Workspace ws;
  ws.capacity = capacity;
  ws.act.resize(shapes_.size());
  ws.delta.resize(shapes_.size());
  ws.scratch.resize(layers_.size());
  for (std::size_t i = 0; i < shapes_.size(); ++i) {
    ws.act[i].resize(capacity * shapes_[i].size());
    ws.delta[i].resize(capacity * shapes_[i].size());
  }
  return ws;
}

const float* Network::forward(const float* params, const float* x, std::size_t n, Workspace& ws) const {
  if (n > ws.capacity) ws = workspace(n);
  if (shapes_.empty()) throw InputError("forward: the network has no layers");
  // Input samples are [n][C][H][W]; the convolutional stage wants
  // [C][n][H][W]. With one channel the two are the same memory.
  const Shape in = input_;
  float* a0 = ws.act[0].data();
  if (in.c == 1 || flat_.front()) {
    std::copy_n(x, n * in.size(), a0);
  } else {
    const std::size_t hw = in.h * in.w;
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t c = 0; c < in.c; ++c) std::copy_n(x + (s * in.c + c) * hw, hw, a0 + (c * n + s) * hw);
  }
  for (std::size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->forward(params, ws.act[i].data(), ws.act[i + 1].data(), n, ws.scratch[i]);
  return ws.act.back().data();
}

double Network::loss(const float* params, const float* x, const std::uint8_t* labels, std::size_t n,
                     Workspace& ws) const {
  if (n == 0) return 0;
  const float* logits = forward(params, x, n, ws);
  return softmax_cross_entropy(logits, labels, n, classes(), nullptr, 0.0f) / static_cast<double>(n);
}

double Network::loss_and_gradient(const float* params, const float* x, const std::uint8_t* labels, std::size_t n,
                                  float* grad, Workspace& ws) const {
  if (n == 0) {
    std::fill_n(grad, layout_.size(), 0.0f);
    return 0;
  }
  if (ws.capacity == 0) ws = workspace(std::min(n, kTile));
  // The layers write their tensors; the padding between them gets zeros,
  // whatever the caller's buffer held.
  std::size_t end = 0;
  for (const Tensor& t : layout_.tensors()) {
    std::fill(grad + end, grad + t.offset, 0.0f);
    end = t.offset + t.span();
  }
  std::fill(grad + end, grad + layout_.size(), 0.0f);
  const std::size_t tile = std::min(n, ws.capacity), D = input_.size(), L = layers_.size(), P = layout_.size();
  const float scale = 1.0f / static_cast<float>(n);  // every tile's share of the batch mean
  double total = 0;
  for (std::size_t first = 0; first < n; first += tile) {
    const std::size_t m = std::min(tile, n - first);
    // The first tile writes grad; later ones write grad_tile, added after.
    float* g = grad;
    if (first > 0) {
      if (ws.grad_tile.size() < P) ws.grad_tile.assign(P, 0.0f);  // the layout's padding stays 0
      g = ws.grad_tile.data();
    }
    const float* logits = forward(params, x + first * D, m, ws);
    total += softmax_cross_entropy(logits, labels + first, m, classes(), ws.delta[L].data(), scale);
    for (std::size_t i = L; i-- > 0;)
      layers_[i]->backward(params, ws.act[i].data(), ws.act[i + 1].data(), ws.delta[i + 1].data(),
                           i == 0 ? nullptr : ws.delta[i].data(), g, m, ws.scratch[i]);
    if (first > 0)
      for (std::size_t i = 0; i < P; ++i) grad[i] += g[i];
  }
  return total / static_cast<double>(n);
}

void check_labels(std::span<const std::uint8_t> labels, std::size_t classes, std::string_view what) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes) {
      throw InputError(fmt::format("{}: sample {} has label {}, but the network has {} classes (labels 0 to {})", what,
                                   i, labels[i], classes, classes - 1));
    }
  }
}

Network lenet5() {
  Network net(Shape{1, 28, 28});
  net.add(conv2d(1, 6, 5, 2)).add(relu()).add(max_pool2());
  net.add(conv2d(6, 16, 5, 0)).add(relu()).add(max_pool2());
  net.add(flatten()).add(linear(400, 120)).add(relu()).add(linear(120, 84)).add(relu()).add(linear(84, 10));
  return net;
}

}  // namespace asgd::dense
