// Point-to-point messaging the collective algorithms are written against,
// so that the same algorithm runs over MPI and, in tests, over ranks that
// are threads of one process.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
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

  // Tagged messages of bytes, for a server that answers any rank (the
  // parameter server). post hands the bytes over and returns at once; poll
  // takes the next message with `tag` from any rank, if one has arrived;
  // flush returns once every posted message has left this rank's buffers.
  // Messages of one tag between one pair of ranks arrive in the order they
  // were posted. Any thread may call these (MPI: MPI_THREAD_MULTIPLE). The
  // defaults throw RuntimeError: a transport for collectives only.
  struct Message {
    int src = -1;
    std::vector<std::byte> bytes;
  };
  virtual void post(std::vector<std::byte> bytes, int dst, int tag);
  virtual bool poll(int tag, Message& out);
  virtual void flush() {}
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
  // A rank's tagged messages from every rank, in arrival order per tag.
  struct TaggedBox {
    std::mutex mutex;
    std::map<int, std::deque<Transport::Message>> by_tag;
  };
  class Endpoint;
  Mailbox& box(int src, int dst) { return boxes_[static_cast<std::size_t>(src * ranks_ + dst)]; }

  int ranks_;
  std::vector<Mailbox> boxes_;
  std::vector<TaggedBox> tagged_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace asgd::net
