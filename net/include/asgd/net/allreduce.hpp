// Allreduce (element-wise sum over ranks, result on every rank), one
// interface with three algorithms. Bytes each rank sends for n floats
// (4n bytes) on P ranks:
//   ring    chunked reduce-scatter then allgather (Baidu, Horovod):
//           2 (P-1)/P * 4n, the bandwidth-optimal bound; 2 (P-1) messages.
//   tree    binomial reduce and binomial broadcast, pipelined in chunks
//           (Vowpal Wabbit's AllReduce), the two interleaved so each link
//           carries partial sums up and totals down at once, with two roots
//           (0 and the largest power of two below P) that swap their sums
//           instead of reducing to one and broadcasting back: up to
//           2 log2(P) * 4n for inner ranks, 2 log2(P) - 1 message latencies.
//   native  MPI_Allreduce (needs an MPI transport; over other transports it
//           is a reduce to rank 0 and a broadcast, unpipelined: a reference).
// Any n (0 included) and any P >= 1. net/README.md has the steps.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "asgd/net/transport.hpp"

namespace asgd::net {

enum class Algorithm { tree, ring, native };
Algorithm parse_algorithm(std::string_view name);  // InputError naming the choices
std::string_view to_string(Algorithm a) noexcept;

class Allreduce {
 public:
  virtual ~Allreduce() = default;
  // Replaces `data` on every rank by the sum of all ranks' `data` (same size
  // on every rank). Collective: every rank calls it with the same size.
  virtual void sum(std::span<float> data) = 0;
  virtual Algorithm algorithm() const noexcept = 0;
};

// `chunk_floats`: the pipelining unit of `tree` (and the largest message of
// the unpipelined reference), in floats; 0 picks it by message size and P
// (tree: 1008 floats, under Open MPI's 4 KB shared-memory eager limit, up to
// 16 KB, and up to 1 MB at P = 2; otherwise 16384).
std::unique_ptr<Allreduce> make_allreduce(Algorithm algorithm, Transport& transport, std::size_t chunk_floats = 0);

// Where each rank's part of a ring allreduce lies: n floats in P segments
// whose sizes differ by at most one (the first n % P get one more).
struct Segment {
  std::size_t offset, size;
};
Segment ring_segment(std::size_t n, int parts, int index) noexcept;

}  // namespace asgd::net
