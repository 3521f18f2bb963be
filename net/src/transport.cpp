#include "asgd/net/transport.hpp"

#include <algorithm>
#include <atomic>
#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd::net {

void Transport::post(std::vector<std::byte> /*bytes*/, int /*dst*/, int /*tag*/) {
  throw RuntimeError("this transport carries collectives only, not tagged messages");
}

bool Transport::poll(int /*tag*/, Message& /*out*/) {
  throw RuntimeError("this transport carries collectives only, not tagged messages");
}

std::unique_ptr<Window> Transport::window(std::size_t /*bytes*/) {
  throw RuntimeError("this transport has no one-sided communication (windows)");
}

namespace {

class FirstRanks final : public Transport {
 public:
  FirstRanks(Transport& parent, int count) : parent_(parent), count_(count) {}
  int rank() const noexcept override { return parent_.rank(); }
  int size() const noexcept override { return count_; }
  void send(std::span<const float> data, int dst) override { parent_.send(data, checked(dst)); }
  void recv(std::span<float> data, int src) override { parent_.recv(data, checked(src)); }
  void sendrecv(std::span<const float> send_data, int dst, std::span<float> recv_data, int src) override {
    parent_.sendrecv(send_data, checked(dst), recv_data, checked(src));
  }
  bool one_host() const noexcept override { return parent_.one_host(); }

 private:
  int checked(int r) const {
    if (r < 0 || r >= count_) throw RuntimeError(fmt::format("rank {}: no rank {} among the first {}", rank(), r, count_));
    return r;
  }
  Transport& parent_;
  int count_;
};

}  // namespace

std::unique_ptr<Transport> first_ranks(Transport& parent, int count) {
  if (count < 1 || count > parent.size() || parent.rank() >= count) {
    throw InputError(fmt::format("the first {} of {} ranks: rank {} is not among them, or they are none", count,
                                 parent.size(), parent.rank()));
  }
  return std::make_unique<FirstRanks>(parent, count);
}

struct LocalFabric::Regions {
  explicit Regions(int ranks) : words(static_cast<std::size_t>(ranks)), bytes(static_cast<std::size_t>(ranks)) {}
  std::vector<std::vector<std::uint64_t>> words;  // each rank's region, 8-byte aligned
  std::vector<std::size_t> bytes;
};

// Operations land at once, as atomic operations on the other ranks' memory: floats relaxed, words sequentially
// consistent read-modify-writes and loads, so that a word raised after adds publishes them to a rank that
// reads it.
class LocalFabric::LocalWindow final : public Window {
 public:
  LocalWindow(LocalFabric& fabric, int rank, std::shared_ptr<Regions> regions)
      : fabric_(fabric), rank_(rank), regions_(std::move(regions)) {}
  void add(int dst, std::size_t offset, std::span<const float> values) override {
    float* p = floats(dst, offset, values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      std::atomic_ref<float>(p[i]).fetch_add(values[i], std::memory_order_relaxed);
  }
  void put(int dst, std::size_t offset, std::span<const float> values) override {
    float* p = floats(dst, offset, values.size());
    for (std::size_t i = 0; i < values.size(); ++i) std::atomic_ref<float>(p[i]).store(values[i], std::memory_order_relaxed);
  }
  void get(int src, std::size_t offset, std::span<float> out) override {
    float* p = floats(src, offset, out.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::atomic_ref<float>(p[i]).load(std::memory_order_relaxed);
  }
  void raise(int dst, std::size_t offset, std::span<const std::uint64_t> words) override {
    std::uint64_t* p = at<std::uint64_t>(dst, offset, words.size());
    for (std::size_t i = 0; i < words.size(); ++i) {
      // Always a read-modify-write, the same value stored when it is not raised: a release either way.
      std::atomic_ref<std::uint64_t> w(p[i]);
      std::uint64_t old = w.load();
      while (!w.compare_exchange_weak(old, std::max(old, words[i]))) {
      }
    }
  }
  void get(int src, std::size_t offset, std::span<std::uint64_t> out) override {
    std::uint64_t* p = at<std::uint64_t>(src, offset, out.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::atomic_ref<std::uint64_t>(p[i]).load();
  }
  // Operations are complete when they return; the ordering flush stands for comes from the words: float
  // operations before a raise are released by it, and a get of the raised word acquires them.
  void flush() override {}
  void barrier() override { fabric_.barrier(); }

 private:
  float* floats(int rank, std::size_t offset, std::size_t n) {
    if (offset % alignof(float) != 0) throw RuntimeError(fmt::format("window: floats at byte {}", offset));
    return at<float>(rank, offset, n);
  }
  template <class T>
  T* at(int rank, std::size_t offset, std::size_t n) {
    if (rank < 0 || rank >= fabric_.ranks_)
      throw InputError(fmt::format("rank {}: no rank {} among {}", rank_, rank, fabric_.ranks_));
    const auto r = static_cast<std::size_t>(rank);
    if (offset % alignof(T) != 0 || offset > regions_->bytes[r] || n > (regions_->bytes[r] - offset) / sizeof(T)) {
      throw RuntimeError(fmt::format("rank {}: {} values of {} bytes at byte {} of rank {}'s window of {} bytes",
                                     rank_, n, sizeof(T), offset, rank, regions_->bytes[r]));
    }
    return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(regions_->words[r].data()) + offset);
  }
  LocalFabric& fabric_;
  int rank_;
  std::shared_ptr<Regions> regions_;
};

class LocalFabric::Endpoint final : public Transport {
 public:
  Endpoint(LocalFabric& fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return fabric_.ranks_; }
  void send(std::span<const float> data, int dst) override {
    check(dst);
    Mailbox& box = fabric_.box(rank_, dst);
    {
      std::lock_guard lock(box.mutex);
      box.messages.emplace_back(data.begin(), data.end());
    }
    box.ready.notify_one();
  }
  void recv(std::span<float> data, int src) override {
    check(src);
    Mailbox& box = fabric_.box(src, rank_);
    std::vector<float> message;
    {
      std::unique_lock lock(box.mutex);
      box.ready.wait(lock, [&] { return !box.messages.empty(); });
      message = std::move(box.messages.front());
      box.messages.pop_front();
    }
    if (message.size() != data.size())
      throw RuntimeError(fmt::format("rank {}: expected {} floats from rank {}, got {}", rank_, data.size(), src,
                                     message.size()));
    std::copy(message.begin(), message.end(), data.begin());
  }
  void sendrecv(std::span<const float> send_data, int dst, std::span<float> recv_data, int src) override {
    send(send_data, dst);  // buffered: never blocks
    recv(recv_data, src);
  }
  void post(std::vector<std::byte> bytes, int dst, int tag) override {
    check(dst);
    TaggedBox& box = fabric_.tagged_[static_cast<std::size_t>(dst)];
    std::scoped_lock lock(box.mutex);
    box.by_tag[tag].push_back(Message{rank_, std::move(bytes)});
  }
  bool poll(int tag, Message& out) override {
    TaggedBox& box = fabric_.tagged_[static_cast<std::size_t>(rank_)];
    std::scoped_lock lock(box.mutex);
    auto it = box.by_tag.find(tag);
    if (it == box.by_tag.end() || it->second.empty()) return false;
    out = std::move(it->second.front());
    it->second.pop_front();
    return true;
  }
  bool one_host() const noexcept override { return true; }
  std::unique_ptr<Window> window(std::size_t bytes) override {
    // The k-th call of every rank meets at the fabric's k-th regions: each rank puts its region in and keeps
    // the set; once all have (a barrier) the set is whole, and rank 0 takes it out of the fabric.
    const std::uint64_t k = windows_made_++;
    std::shared_ptr<Regions> regions;
    {
      std::scoped_lock lock(fabric_.barrier_mutex_);
      auto& slot = fabric_.windows_[k];
      if (!slot) slot = std::make_shared<Regions>(fabric_.ranks_);
      regions = slot;
      const auto r = static_cast<std::size_t>(rank_);
      regions->words[r].assign((bytes + 7) / 8, 0);
      regions->bytes[r] = bytes;
    }
    fabric_.barrier();
    auto w = std::make_unique<LocalWindow>(fabric_, rank_, regions);
    if (rank_ == 0) {
      std::scoped_lock lock(fabric_.barrier_mutex_);
      fabric_.windows_.erase(k);
    }
    return w;
  }

 private:
  void check(int peer) const {
    if (peer < 0 || peer >= fabric_.ranks_)
      throw InputError(fmt::format("rank {}: no rank {} among {}", rank_, peer, fabric_.ranks_));
  }
  LocalFabric& fabric_;
  int rank_;
  std::uint64_t windows_made_ = 0;
};

void LocalFabric::barrier() {
  std::unique_lock lock(barrier_mutex_);
  const std::uint64_t generation = barrier_generation_;
  if (++barrier_waiting_ == ranks_) {
    barrier_waiting_ = 0;
    ++barrier_generation_;
    barrier_cv_.notify_all();
    return;
  }
  barrier_cv_.wait(lock, [&] { return barrier_generation_ != generation; });
}

LocalFabric::LocalFabric(int ranks) : ranks_(ranks), boxes_(static_cast<std::size_t>(std::max(ranks, 1) * std::max(ranks, 1))) {
  if (ranks < 1) throw InputError("LocalFabric: at least one rank");
  tagged_ = std::vector<TaggedBox>(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

LocalFabric::~LocalFabric() = default;

Transport& LocalFabric::endpoint(int rank) { return *endpoints_.at(static_cast<std::size_t>(rank)); }

}  // namespace asgd::net
