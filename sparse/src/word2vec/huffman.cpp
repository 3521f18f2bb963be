#include "asgd/sparse/word2vec/huffman.hpp"

#include <algorithm>
#include <functional>
#include <queue>

namespace asgd::sparse::w2v {

HuffmanTree::HuffmanTree(std::span<const std::uint64_t> counts) {
  const std::size_t n = counts.size();
  begin_.assign(n + 1, 0);
  if (n <= 1) {  // one word: a single inner node, code "1"... kept trivial
    codes_.assign(n, 1);
    points_.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) begin_[i + 1] = i + 1;
    inner_ = 1;
    return;
  }
  // Nodes 0..n-1 are words, n..2n-2 inner nodes; merge the two lightest,
  // ties broken by node index so the tree is deterministic.
  std::vector<std::uint64_t> weight(2 * n - 1);
  std::vector<std::uint32_t> parent(2 * n - 1, 0);
  std::vector<std::uint8_t> bit(2 * n - 1, 0);
  std::copy(counts.begin(), counts.end(), weight.begin());
  using Item = std::pair<std::uint64_t, std::uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (std::uint32_t i = 0; i < n; ++i) heap.emplace(weight[i], i);
  for (std::uint32_t node = static_cast<std::uint32_t>(n); node < 2 * n - 1; ++node) {
    const auto [w1, a] = heap.top();
    heap.pop();
    const auto [w2, b] = heap.top();
    heap.pop();
    weight[node] = w1 + w2;
    parent[a] = parent[b] = node;
    bit[b] = 1;  // word2vec.c: the heavier child gets code 1
    heap.emplace(weight[node], node);
  }
  const std::uint32_t root = static_cast<std::uint32_t>(2 * n - 2);
  inner_ = n - 1;
  std::vector<std::uint8_t> code;
  std::vector<std::uint32_t> path;
  for (std::uint32_t w = 0; w < n; ++w) {
    code.clear();
    path.clear();
    for (std::uint32_t node = w; node != root; node = parent[node]) {
      code.push_back(bit[node]);
      path.push_back(parent[node] - static_cast<std::uint32_t>(n));  // inner node row
    }
    // Root first, as word2vec.c stores them.
    codes_.insert(codes_.end(), code.rbegin(), code.rend());
    points_.insert(points_.end(), path.rbegin(), path.rend());
    begin_[w + 1] = codes_.size();
  }
}

}  // namespace asgd::sparse::w2v
