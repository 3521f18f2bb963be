// Transparent huge pages for large buffers.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace asgd {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;  // x86-64's and arm64's usual huge page

// Asks the kernel to back the 2 MiB-aligned part of [data, data + bytes) with transparent huge pages (Linux's
// madvise(MADV_HUGEPAGE), which a system whose THP setting is "madvise" needs): the first writes to a buffer
// fault in 512 times fewer pages, and reads scattered over it miss the TLB less. Call it before the buffer is
// written. A range without a whole huge page in it, an error and other systems: nothing.
void advise_huge_pages(void* data, std::size_t bytes) noexcept;

// An allocator for large arrays that are written before they are read: its memory is advised onto huge pages,
// and vector(n) or resize(n) leave the elements default-initialised (a trivial type's bytes unset) instead of
// zero-filling what the caller overwrites.
template <class T>
class LargeArrayAllocator : public std::allocator<T> {
 public:
  using value_type = T;
  template <class U>
  struct rebind {
    using other = LargeArrayAllocator<U>;
  };
  LargeArrayAllocator() noexcept = default;
  template <class U>
  LargeArrayAllocator(const LargeArrayAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    T* p = std::allocator<T>::allocate(n);
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T, class U>
bool operator==(const LargeArrayAllocator<T>&, const LargeArrayAllocator<U>&) noexcept {
  return true;
}

}  // namespace asgd
