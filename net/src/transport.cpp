#include "asgd/net/transport.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "asgd/engine/errors.hpp"

namespace asgd::net {

void Transport::post(std::vector<std::byte> /*bytes*/, int /*dst*/, int /*tag*/) {
  throw RuntimeError("this transport carries collectives only, not tagged messages");
}

bool Transport::poll(int /*tag*/, Message& /*out*/) {
  throw RuntimeError("this transport carries collectives only, not tagged messages");
}

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

 private:
  void check(int peer) const {
    if (peer < 0 || peer >= fabric_.ranks_)
      throw InputError(fmt::format("rank {}: no rank {} among {}", rank_, peer, fabric_.ranks_));
  }
  LocalFabric& fabric_;
  int rank_;
};

LocalFabric::LocalFabric(int ranks) : ranks_(ranks), boxes_(static_cast<std::size_t>(std::max(ranks, 1) * std::max(ranks, 1))) {
  if (ranks < 1) throw InputError("LocalFabric: at least one rank");
  tagged_ = std::vector<TaggedBox>(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

LocalFabric::~LocalFabric() = default;

Transport& LocalFabric::endpoint(int rank) { return *endpoints_.at(static_cast<std::size_t>(rank)); }

}  // namespace asgd::net
