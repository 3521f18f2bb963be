// The Huffman tree over word counts for hierarchical softmax (word2vec.c's
// CreateBinaryTree): each word gets a code (left/right turns from the root)
// and the inner nodes on its path (rows of the "hs" tensor).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace asgd::sparse::w2v {

class HuffmanTree {
 public:
  HuffmanTree() = default;
  // counts in any order; a single word gets a one-node path.
  explicit HuffmanTree(std::span<const std::uint64_t> counts);

  std::span<const std::uint8_t> code(std::uint32_t word) const noexcept {
    return {codes_.data() + begin_[word], begin_[word + 1] - begin_[word]};
  }
  std::span<const std::uint32_t> points(std::uint32_t word) const noexcept {
    return {points_.data() + begin_[word], begin_[word + 1] - begin_[word]};
  }
  // Inner nodes: rows of the "hs" tensor (words - 1, at least 1).
  std::size_t inner_nodes() const noexcept { return inner_; }

 private:
  std::vector<std::uint8_t> codes_;
  std::vector<std::uint32_t> points_;
  std::vector<std::size_t> begin_;
  std::size_t inner_ = 1;
};

}  // namespace asgd::sparse::w2v
