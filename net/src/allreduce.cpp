#include "asgd/net/allreduce.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <fmt/format.h>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/net/mpi.hpp"

namespace asgd::net {

Algorithm parse_algorithm(std::string_view name) {
  if (name == "tree") return Algorithm::tree;
  if (name == "ring") return Algorithm::ring;
  if (name == "native") return Algorithm::native;
  throw InputError(fmt::format("expected tree, ring or native, got '{}'", name));
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

// Binomial tree, pipelined chunk by chunk, with the reduce and the
// broadcast interleaved. Let M be the largest power of two below P. Ranks
// below M form a binomial tree rooted at 0, ranks from M on one rooted at M
// (relative rank r - M); 0 and M are the two roots. In step s a rank first
// exchanges with each child (sending it the total of chunk s - 1 - depth,
// receiving its partial sum of chunk s, which it adds), then with its parent
// (sending its partial sum of chunk s, receiving the total of chunk
// s - depth). The two roots instead swap their partial sums of chunk s and
// each adds the other's, so both hold the total at once: where a single
// root would reduce to 0 and broadcast back to M, the top link carries the
// same bytes in both directions in one message latency, not two. So partial
// sums travel up while totals travel down over the same links in the same
// steps; for m chunks the job takes m + 1 + depth steps instead of
// 2 (m + depth), and at P = 2 one exchange per chunk.
// (depth = popcount(r) with bit M cleared: the distance from its root.)
class Tree final : public Allreduce {
 public:
  // chunk 0: by message size (chunk_for).
  Tree(Transport& t, std::size_t chunk) : t_(t), fixed_chunk_(chunk) {}
  Algorithm algorithm() const noexcept override { return Algorithm::tree; }
  // A decision table measured on the 2-core VM (bench/RESULTS.md,
  // "Allreduce bus bandwidth"). Small messages go in chunks that fit Open
  // MPI's shared-memory eager limit (4 KB with its header), so no chunk
  // waits for a rendezvous: at P = 2 up to 1 MB, where the two roots' swaps
  // stream back to back. With more ranks (there 4 ranks on 2 cores) every
  // message costs a reschedule, so from 16 KB on fewer, 64 KB chunks win;
  // from 1 MB they do at any P.
  static std::size_t chunk_for(std::size_t n, int P) noexcept {
    constexpr std::size_t eager = 1008, large = std::size_t{1} << 14;
    if (n >= (std::size_t{1} << 18)) return large;
    return P == 2 || n <= 4096 ? eager : large;
  }
  void sum(std::span<float> data) override {
    const int P = t_.size(), r = t_.rank();
    if (P == 1 || data.empty()) return;
    chunk_ = fixed_chunk_ ? fixed_chunk_ : chunk_for(data.size(), P);
    const int top = static_cast<int>(std::bit_floor(static_cast<unsigned>(P - 1)));  // M
    const int base = r >= top ? top : 0;  // this rank's root
    const int x = r - base;               // rank within its tree
    const int tree_size = base == 0 ? top : P - top;
    // Children are r + mask for the masks below x's lowest set bit; the
    // parent is r - lowest bit (a root has none, and its peer root instead).
    std::vector<int> children;
    int parent = -1;
    for (int mask = 1; mask < top; mask <<= 1) {
      if (x & mask) {
        parent = r - mask;
        break;
      }
      if (x + mask < tree_size) children.push_back(r + mask);
    }
    const int peer = x == 0 ? (base == 0 ? top : 0) : -1;
    auto depth_of = [top](int q) {
      return static_cast<std::int64_t>(std::popcount(static_cast<unsigned>(q >= top ? q - top : q)));
    };
    const std::int64_t depth = depth_of(r);
    std::int64_t max_depth = 0;
    for (int q = 0; q < P; ++q) max_depth = std::max(max_depth, depth_of(q));
    const auto chunks = static_cast<std::int64_t>((data.size() + chunk_ - 1) / chunk_);
    auto chunk = [&](std::int64_t k) -> std::span<float> {
      if (k < 0 || k >= chunks) return {};
      const std::size_t first = static_cast<std::size_t>(k) * chunk_;
      return data.subspan(first, std::min(chunk_, data.size() - first));
    };
    buffer_.resize(std::min(chunk_, data.size()));
    for (std::int64_t s = 0; s < chunks + 1 + max_depth; ++s) {
      const auto up = chunk(s);                    // partial sums of chunk s go up
      const auto down = chunk(s - 1 - depth);      // totals this rank passes down
      for (int c : children) {
        std::span<float> tmp(buffer_.data(), up.size());
        if (!up.empty() && !down.empty()) t_.sendrecv(down, c, tmp, c);
        else if (!up.empty()) t_.recv(tmp, c);
        else if (!down.empty()) t_.send(down, c);
        add_into(up, tmp);
      }
      if (peer >= 0 && !up.empty()) {
        std::span<float> tmp(buffer_.data(), up.size());
        t_.sendrecv(up, peer, tmp, peer);
        add_into(up, tmp);
      } else if (parent >= 0) {
        const auto from_parent = chunk(s - depth);  // the parent's `down` of this step
        if (!up.empty() && !from_parent.empty()) t_.sendrecv(up, parent, from_parent, parent);
        else if (!up.empty()) t_.send(up, parent);
        else if (!from_parent.empty()) t_.recv(from_parent, parent);
      }
    }
  }

 private:
  Transport& t_;
  std::size_t fixed_chunk_, chunk_ = 1;
  std::vector<float> buffer_;
};

// Without MPI: every rank sends its data to rank 0, which sums and sends the
// total back. A plain reference for tests on other transports.
class Gather final : public Allreduce {
 public:
  Gather(Transport& t, std::size_t chunk) : t_(t), chunk_(chunk ? chunk : std::size_t{1} << 14) {}
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
