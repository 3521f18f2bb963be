// Point-to-point messaging the collective algorithms are written against,
// so that the same algorithm runs over MPI and, in tests, over ranks that
// are threads of one process.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

namespace asgd::net {

// Memory each rank exposes for the others to read and add to without its
// involvement (MPI passive-target one-sided communication: MPI_Win_allocate
// under MPI_Win_lock_all). Offsets are in bytes into the target rank's
// region; floats at offsets that are multiples of 4, words (uint64) of 8.
// Every operation is atomic element by element: floats are added (MPI_SUM)
// or replaced, words raised to a maximum (MPI_MAX); a get of floats sees a
// concurrent add or not, element by element (Hogwild across ranks; over MPI
// this reads floats with MPI_Get, which the standard leaves undefined beside
// a concurrent MPI_Accumulate and which on one host, osc/sm, copies whole
// aligned floats). An
// operation is complete, at its target and in a get's buffer, once this rank
// calls flush(); until then the data given to add, put and raise must not
// change. What a rank flushed before raising a word is seen by any rank whose
// get of that word, flushed, read the raised value.
class Window {
 public:
  virtual ~Window() = default;
  virtual void add(int dst, std::size_t offset, std::span<const float> values) = 0;
  virtual void put(int dst, std::size_t offset, std::span<const float> values) = 0;
  virtual void get(int src, std::size_t offset, std::span<float> out) = 0;
  virtual void raise(int dst, std::size_t offset, std::span<const std::uint64_t> words) = 0;
  virtual void get(int src, std::size_t offset, std::span<std::uint64_t> out) = 0;
  virtual void flush() = 0;
  // Collective: every rank's operations before it are complete and seen by every rank after it.
  virtual void barrier() = 0;
  // Collective: ends the window (MPI_Win_free). One destroyed without it is left to the end of the job, so
  // that a rank unwinding from an error does not wait there for the others.
  virtual void close() {}
};

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

  // Whether every rank runs on this host (one-sided operations then land in shared memory).
  virtual bool one_host() const noexcept { return false; }
  // Collective: a Window whose region on this rank is `bytes` long, zeroed
  // (the ranks may ask for different sizes). The default throws
  // RuntimeError: a transport without one-sided communication.
  virtual std::unique_ptr<Window> window(std::size_t bytes);
};

// Ranks [0, count) of `parent` as a transport of their own, for the
// collectives of a job whose last ranks do something else (the parameter
// server's dedicated server ranks): its rank is the parent's, its size
// `count`, and its transfers go over the parent's. Tagged messages and
// windows are refused (they are the parent's to use). `parent` outlives it;
// InputError unless 1 <= count <= parent.size() and this rank is below count.
std::unique_ptr<Transport> first_ranks(Transport& parent, int count);

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
  // The regions of the windows being made: the k-th window() call of every rank meets here.
  struct Regions;
  class Endpoint;
  class LocalWindow;
  Mailbox& box(int src, int dst) { return boxes_[static_cast<std::size_t>(src * ranks_ + dst)]; }
  void barrier();

  int ranks_;
  std::vector<Mailbox> boxes_;
  std::vector<TaggedBox> tagged_;
  std::mutex barrier_mutex_;
  std::condition_variable barrier_cv_;
  int barrier_waiting_ = 0;
  std::uint64_t barrier_generation_ = 0;
  std::map<std::uint64_t, std::shared_ptr<Regions>> windows_;  // guarded by barrier_mutex_
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace asgd::net
