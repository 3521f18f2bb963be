// ParamStore: the shared parameter vector, on the heap or in a named
// Boost.Interprocess shared-memory segment that several processes attach.
//
// A segment starts with a header (magic, format version, layout hash, element
// count, creator pid, the pids of attached writers) that attach checks; it is
// created owner-only (0600). Recovery rules, in the order attach applies them:
//  * no such segment                  -> InputError ("no shared segment ...")
//  * another user's, or with a group
//    or other permission bit          -> UntrustedSegment (whose it is, its
//    mode, what to do): another user could have written it, or truncate it
//    under this process
//  * not an asgd segment / other
//    version / other layout           -> InputError naming what differs
//  * creator still initialising       -> attach waits while the creator lives
//    (at most 10 minutes; set_wait_notice hears of it after 2 s), then goes
//    on as below; InputError if the name is removed meanwhile
//  * creator died before it was ready -> InputError: stale, remove it (a
//    creator writes the header, with its pid, before it sizes the segment)
//  * no header after 2 s              -> InputError; one that no process
//    holds (its creator died before writing the header) is abandoned_shared
//  * a writer with other settings     -> InputError naming both (the
//    objective the writers train, kept by the creator; AttachOptions)
//  * a writer died without detaching  -> InputError naming the pid, unless
//    AttachOptions::recover_stale: then the dead writer's slot is cleared and
//    the parameters (valid floats, maybe mid-update) are taken as they are.
//  * a stop request (AttachOptions::stop) while waiting -> StopRequested,
//    within 5 ms; nothing attached or made
// Sizes are checked against the header before the parameters are mapped. A
// segment truncated while mapped (by its owner or root) ends the process at
// the first touch past its new end, with a message naming it and exit status
// 1, instead of SIGBUS (engine/src/segment_fault.hpp says why it cannot go on).
// create_shared on an existing name fails unless CreateOptions::replace_stale
// and every process that had it attached is dead, in which case the old
// segment is removed and a fresh one made. `asgd shm info|remove NAME` is the
// command-line side of the same rules.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "asgd/engine/errors.hpp"
#include "asgd/engine/layout.hpp"

namespace asgd {

// A shared segment that another user could have written or could truncate: it
// belongs to another user than this process's effective one, or has a group
// or other permission bit. Attaches and inspect_shared refuse it; the message
// names it, says whose it is and its mode, and what to do.
class UntrustedSegment : public InputError {
 public:
  UntrustedSegment(std::string segment, unsigned owner_uid, unsigned mode);
  // "user alice (uid 1001, mode 0666)" (a uid without a name: "a user without a name (uid ...)").
  static std::string whose(unsigned owner_uid, unsigned mode);
  bool foreign() const noexcept;  // another user's (else its mode is the fault)
  std::string segment;
  unsigned owner_uid;
  unsigned mode;  // permission bits (07777)
};

// A stop request (AttachOptions::stop) ended a wait for a segment: nothing was
// attached or made.
class StopRequested : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

enum class Access { read_write, read_only };

struct CreateOptions {
  // Replace an existing segment nobody alive uses. Not safe against two
  // processes replacing the same name at once (one may remove the other's
  // new segment); the command line never does it, `asgd shm remove` does.
  bool replace_stale = false;
  // What the writers train, as text ("--loss logistic --l2 0.0001"): kept
  // in the header for every writer that attaches to compare (see
  // AttachOptions::settings). Empty: none kept.
  std::string settings = {};  // (an initializer: designated {.replace_stale = true} leaves it out unwarned)
};

struct AttachOptions {
  bool recover_stale = false;  // take over a segment whose writer was killed
  // A writer's settings (CreateOptions::settings): a read-write attach is
  // refused (InputError naming both) when the segment keeps other settings.
  // Processes that train one segment must train one objective: their
  // Hogwild! updates would otherwise mix two problems, each quietly pulling
  // the parameters towards its own optimum. Empty on either side: nothing
  // compared. Readers never compare. open_or_create_shared keeps them in a
  // segment it creates.
  std::string settings = {};
  // A stop request (StopOnSignal::flag(), a caller's own): set while an attach
  // waits for another process to finish making the segment (up to 10 min), it
  // ends the wait within 5 ms with StopRequested, and open_or_create_shared
  // then makes nothing. Null: none.
  const std::atomic<bool>* stop = nullptr;
};

// What a segment's header says, and which of its processes are still alive.
// Which object a segment's name stood for (its device and inode): a name
// removed and made again names another object.
struct SegmentId {
  std::uint64_t device = 0, inode = 0;
  friend bool operator==(const SegmentId&, const SegmentId&) = default;
};

struct SegmentInfo {
  std::string name;
  std::uint32_t format_version = 0;
  std::uint64_t layout_hash = 0;
  std::uint64_t elements = 0;
  std::string layout;  // Layout::serialize() of the creator
  std::string settings;  // CreateOptions::settings of the creator (empty: none)
  int creator_pid = 0;
  bool creator_alive = false;  // its creator lives (the same process: its pid and start time)
  bool ready = false;  // the creator finished initialising it
  std::vector<int> writers;       // attached read-write, alive
  std::vector<int> dead_writers;  // attached read-write, died without detaching
  SegmentId id;                   // the object inspected (remove_shared(name, id) removes that one only)
  bool stale() const noexcept { return !dead_writers.empty() || !ready; }
};

class ParamStore {
 public:
  // Heap storage, zero-filled, 64-byte aligned.
  static ParamStore on_heap(Layout layout);

  // Creates segment `name` (zero-filled) and attaches it read-write.
  // `initialize`, when given, fills the parameters before the segment is
  // marked ready, so a process attaching meanwhile waits and never sees it
  // half made; when it throws, the segment is removed and the exception
  // passes on.
  static ParamStore create_shared(const std::string& name, Layout layout, CreateOptions options = {},
                                  const std::function<void(ParamStore&)>& initialize = {});
  // Attaches an existing segment; its layout must equal `expected`.
  static ParamStore attach_shared(const std::string& name, const Layout& expected,
                                  Access access = Access::read_write, AttachOptions options = {});
  // Attaches with whatever layout the segment has (for tools and servers).
  static ParamStore attach_shared_any(const std::string& name, Access access = Access::read_only,
                                      AttachOptions options = {});
  // Throws InputError when there is no such segment or it is not asgd's.
  static SegmentInfo inspect_shared(const std::string& name);
  // Whether a shared-memory object (an asgd segment or any other) has this
  // name; InputError for a name that could not be a segment's.
  static bool exists_shared(const std::string& name);
  // InputError when this process may not remove `name` (only its owner or
  // root may: the shared-memory directory is sticky), saying whose it is;
  // nothing when it may, or when there is no such object.
  static void check_removable_shared(const std::string& name);
  // Attaches read-write when `name` exists, else creates it; safe when
  // several processes race to start on the same name. `created`, when
  // given, says whether this call made the segment (only then should the
  // caller initialise it: of racing processes exactly one is told so).
  // `initialize`, when given, runs on a segment this call creates before any
  // other process may attach (as in create_shared). With
  // AttachOptions::recover_stale, a segment whose creator died before making
  // it ready is replaced by a new one (it holds nothing). With
  // AttachOptions::stop set, nothing is made (StopRequested).
  static ParamStore open_or_create_shared(const std::string& name, Layout layout, AttachOptions options = {},
                                          bool* created = nullptr,
                                          const std::function<void(ParamStore&)>& initialize = {});
  // The object's id when `name` is what a creator killed before writing the
  // header left behind (0 bytes, or a header's size without the magic),
  // unchanged for 2 s and held by no process, open or mapped (a live creator
  // holds its object open); none for anything else (another user's object
  // among them: not ours to judge), and none when a process
  // that could hold it cannot be looked into. Such an object holds nothing:
  // `asgd shm remove` and recovery remove it, as they do a segment whose
  // creator died before it was ready. Linux (/proc); none where that cannot
  // be told.
  static std::optional<SegmentId> abandoned_shared(const std::string& name);
  // Called once per attach that has waited 2 s for a creator to finish
  // initialising (the command line prints it on stderr); none by default.
  static void set_wait_notice(std::function<void(const std::string&)> notice);
  // Returns false when there was nothing to remove. Attached processes keep
  // their mapping; the name is free at once. Removes whatever object has
  // the name: callers check first that it is a segment of theirs
  // (inspect_shared), as `asgd shm remove` does.
  static bool remove_shared(const std::string& name) noexcept;
  // Removes `name` only while it names the object `only` (segment_id() of a
  // store that attached it): not a segment made again under the name since.
  // The check and the removal are two calls, made under one lock that every
  // removal by id takes (flock on /dev/shm), so two processes replacing one
  // stale segment cannot remove the one the other made again.
  static bool remove_shared(const std::string& name, SegmentId only) noexcept;

  // A moved-from store may only be assigned to or destroyed.
  ParamStore(ParamStore&&) noexcept;
  ParamStore& operator=(ParamStore&&) noexcept;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;
  ~ParamStore();  // detaches (a writer frees its slot); never removes a segment

  const Layout& layout() const noexcept;
  std::size_t size() const noexcept { return size_; }
  bool writable() const noexcept { return writable_; }
  bool is_shared() const noexcept;
  const std::string& segment_name() const noexcept;
  SegmentId segment_id() const noexcept;  // {} on the heap

  // Raw access for the engine's sinks; throws RuntimeError when read-only.
  float* data();
  const float* data() const noexcept { return data_; }

  // Relaxed atomic reads and writes of single parameters.
  float load(std::size_t i) const noexcept;
  void store(std::size_t i, float value);
  // A snapshot (relaxed loads) of all parameters, or of one tensor's elements
  // without its padding.
  std::vector<float> snapshot() const;
  std::vector<float> snapshot(std::string_view tensor) const;
  // The first parameter that is NaN or infinite (relaxed loads), if any: a
  // diverged run's mark. A reader of a segment asks it before serving (a
  // run that diverged stops, but leaves its values in the segment).
  std::optional<std::size_t> first_non_finite() const noexcept;
  // Overwrites all parameters (relaxed stores); sizes must match.
  void assign(std::span<const float> values);
  void fill(float value);

 private:
  struct Storage;
  ParamStore(std::unique_ptr<Storage> storage, float* data, std::size_t size, bool writable);
  // Both attaches: the layout is checked against `expected` (when given) before a writer registers or a stale
  // mark is cleared, so a refused attach changes nothing in the segment.
  static ParamStore attach(const std::string& name, const Layout* expected, Access access, AttachOptions options);

  std::unique_ptr<Storage> storage_;
  float* data_ = nullptr;
  std::size_t size_ = 0;
  bool writable_ = false;
};

}  // namespace asgd
