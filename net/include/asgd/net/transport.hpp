// Point-to-point messaging the collective algorithms are written against,
// so that the same algorithm runs over MPI and, in tests, over ranks that
// are threads of one process.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace asgd::net {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Blocking point-to-point transfers of floats. Messages between one pair
  // of ranks arrive in the order they were sent; a receive must name the
  // exact size that was sent.
  virtual void send(std::span<const float> data, int dst) = 0;
  virtual void recv(std::span<float> data, int src) = 0;
  // Sends to `dst` and receives from `src` at once (deadlock-free when every
  // rank of a ring calls it together).
  virtual void sendrecv(std::span<const float> send_data, int dst, std::span<float> recv_data, int src) = 0;
};

// P ranks as threads of one process: fabric.endpoint(r) is rank r's
// Transport. Sends are buffered (never block), receives wait.
class LocalFabric {
 public:
  explicit LocalFabric(int ranks);
  ~LocalFabric();
  Transport& endpoint(int rank);
  int size() const noexcept { return ranks_; }

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::vector<float>> messages;
  };
  class Endpoint;
  Mailbox& box(int src, int dst) { return boxes_[static_cast<std::size_t>(src * ranks_ + dst)]; }

  int ranks_;
  std::vector<Mailbox> boxes_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace asgd::net
