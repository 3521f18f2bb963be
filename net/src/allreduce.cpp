#include "asgd/net/allreduce.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/net/mpi.hpp"

namespace asgd::net {

Algorithm parse_algorithm(std::string_view name) {
  if (name == "tree") return Algorithm::tree;
  if (name == "ring") return Algorithm::ring;
  if (name == "native") return Algorithm::native;
  throw InputError(fmt::format("--allreduce: expected tree, ring or native, got '{}'", name));
}

std::string_view to_string(Algorithm a) noexcept {
  switch (a) {
    case Algorithm::tree: return "tree";
    case Algorithm::ring: return "ring";
    case Algorithm::native: return "native";
  }
  return "?";
}

Segment ring_segment(std::size_t n, int parts, int index) noexcept {
  const std::size_t p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(index);
  const std::size_t base = n / p, extra = n % p;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

namespace {

void add_into(std::span<float> acc, std::span<const float> x) noexcept {
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += x[i];
}

// Reduce-scatter then allgather around the ring r -> r + 1. After step s of
// the first phase, rank r holds the partial sum of segment (r - s - 1) over
// s + 2 ranks; after P - 1 steps it owns the total of segment (r + 1).
class Ring final : public Allreduce {
 public:
  explicit Ring(Transport& t) : t_(t) {}
  Algorithm algorithm() const noexcept override { return Algorithm::ring; }
  void sum(std::span<float> data) override {
    const int P = t_.size(), r = t_.rank();
    if (P == 1 || data.empty()) return;
    const int next = (r + 1) % P, prev = (r + P - 1) % P;
    const std::size_t n = data.size();
    buffer_.resize(ring_segment(n, P, 0).size);
    auto seg = [&](int i) {
      const Segment s = ring_segment(n, P, ((i % P) + P) % P);
      return data.subspan(s.offset, s.size);
    };
    for (int s = 0; s < P - 1; ++s) {
      const auto out = seg(r - s), in = seg(r - s - 1);
      std::span<float> tmp(buffer_.data(), in.size());
      t_.sendrecv(out, next, tmp, prev);
      add_into(in, tmp);
    }
    for (int s = 0; s < P - 1; ++s) t_.sendrecv(seg(r + 1 - s), next, seg(r - s), prev);
  }

 private:
  Transport& t_;
  std::vector<float> buffer_;
};

// Binomial tree rooted at rank 0, chunk by chunk: a rank receives each
// child's partial sum of a chunk, adds it, passes the chunk to its parent
// and goes on with the next chunk while the parent still works on this one;
// then the totals flow back down the same tree.
class Tree final : public Allreduce {
 public:
  Tree(Transport& t, std::size_t chunk) : t_(t), chunk_(std::max<std::size_t>(chunk, 1)) {}
  Algorithm algorithm() const noexcept override { return Algorithm::tree; }
  void sum(std::span<float> data) override {
    const int P = t_.size(), r = t_.rank();
    if (P == 1 || data.empty()) return;
    // Children are r + mask for the masks below r's lowest set bit; the
    // parent is r - lowest bit (rank 0 has none).
    std::vector<int> children;
    int parent = -1;
    for (int mask = 1; mask < P; mask <<= 1) {
      if (r & mask) {
        parent = r - mask;
        break;
      }
      if (r + mask < P) children.push_back(r + mask);
    }
    buffer_.resize(std::min(chunk_, data.size()));
    for (std::size_t first = 0; first < data.size(); first += chunk_) {
      const auto part = data.subspan(first, std::min(chunk_, data.size() - first));
      std::span<float> tmp(buffer_.data(), part.size());
      for (int c : children) {
        t_.recv(tmp, c);
        add_into(part, tmp);
      }
      if (parent >= 0) t_.send(part, parent);
    }
    for (std::size_t first = 0; first < data.size(); first += chunk_) {
      const auto part = data.subspan(first, std::min(chunk_, data.size() - first));
      if (parent >= 0) t_.recv(part, parent);
      for (auto c = children.rbegin(); c != children.rend(); ++c) t_.send(part, *c);
    }
  }

 private:
  Transport& t_;
  std::size_t chunk_;
  std::vector<float> buffer_;
};

// Without MPI: every rank sends its data to rank 0, which sums and sends the
// total back. A plain reference for tests on other transports.
class Gather final : public Allreduce {
 public:
  Gather(Transport& t, std::size_t chunk) : t_(t), chunk_(std::max<std::size_t>(chunk, 1)) {}
  Algorithm algorithm() const noexcept override { return Algorithm::native; }
  void sum(std::span<float> data) override {
    const int P = t_.size(), r = t_.rank();
    if (P == 1 || data.empty()) return;
    for (std::size_t first = 0; first < data.size(); first += chunk_) {
      const auto part = data.subspan(first, std::min(chunk_, data.size() - first));
      if (r == 0) {
        buffer_.resize(part.size());
        for (int src = 1; src < P; ++src) {
          t_.recv(buffer_, src);
          add_into(part, buffer_);
        }
        for (int dst = 1; dst < P; ++dst) t_.send(part, dst);
      } else {
        t_.send(part, 0);
        t_.recv(part, 0);
      }
    }
  }

 private:
  Transport& t_;
  std::size_t chunk_;
  std::vector<float> buffer_;
};

}  // namespace

std::unique_ptr<Allreduce> make_allreduce(Algorithm algorithm, Transport& transport, std::size_t chunk_floats) {
  switch (algorithm) {
    case Algorithm::ring: return std::make_unique<Ring>(transport);
    case Algorithm::tree: return std::make_unique<Tree>(transport, chunk_floats);
    case Algorithm::native:
#if ASGD_HAVE_MPI
      if (auto* mpi = dynamic_cast<MpiTransport*>(&transport)) return make_native_allreduce(*mpi);
#endif
      return std::make_unique<Gather>(transport, chunk_floats);
  }
  throw InputError("make_allreduce: unknown algorithm");
}

}  // namespace asgd::net
