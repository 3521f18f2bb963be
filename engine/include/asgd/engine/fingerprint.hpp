// FNV-1a, 64 bits: the engine's fingerprint of what parameters stand for (a
// layout's hash, a factor model's id maps). Stable over runs, compilers and
// machines (integers go in little-endian), so fingerprints may be stored in
// files and segments. Not cryptographic: it tells things apart, it does not
// authenticate them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace asgd {

inline constexpr std::uint64_t kFnv1aStart = 14695981039346656037ULL;

inline std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

inline std::uint64_t fnv1a(std::uint64_t h, std::string_view text) noexcept {
  return fnv1a(h, text.data(), text.size());
}

inline std::uint64_t fnv1a_u64(std::uint64_t h, std::uint64_t v) noexcept {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));  // endian-stable
  return fnv1a(h, bytes, 8);
}

// A string as one field of a fingerprint: its length, then its bytes, so
// that ("ab", "c") and ("a", "bc") differ.
inline std::uint64_t fnv1a_field(std::uint64_t h, std::string_view text) noexcept {
  return fnv1a(fnv1a_u64(h, text.size()), text);
}

// A word folded into a digest by a multiply-xorshift (splitmix64's
// finaliser): eight bytes a step, for digests of whole data sets (a
// resumed run compares its data's with its checkpoint's). Start from
// kFoldStart.
inline constexpr std::uint64_t kFoldStart = 0x9e3779b97f4a7c15ULL;
inline std::uint64_t fold(std::uint64_t h, std::uint64_t word) noexcept {
  h = (h ^ word) * 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

}  // namespace asgd
