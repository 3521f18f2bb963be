// Running a reader on input without end, safely: in a forked child whose memory may grow by a bounded amount,
// so that a reader which reads such input whole fails its test within seconds (std::bad_alloc) instead of taking
// the machine's memory; and endless input from a FIFO.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace asgd::testing {

// The message of what `body` threw in a child process whose address space may grow by `extra_bytes` past what it
// holds at the fork (RLIMIT_AS; so also under AddressSanitizer, whose reservations are already held), "(no
// exception)", or how the child died.
inline std::string message_in_limited_child(std::uint64_t extra_bytes, const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "(no pipe)";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGPIPE, SIG_IGN);  // the endless writers below end on EPIPE
    std::uint64_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const auto held = pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const rlimit limit{held + extra_bytes, held + extra_bytes};
    std::string message = "(no exception)";
    if (::setrlimit(RLIMIT_AS, &limit) != 0) message = "(setrlimit failed)";
    try {
      body();
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "(an exception not derived from std::exception)";
    }
    for (std::size_t done = 0; done < message.size();) {
      const auto n = ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "(child killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  return message;
}

// A FIFO at `path` that gives `head` once and then `pattern` over and over to whoever opens it, until the reader
// closes it. Call it in the child (message_in_limited_child's body): the writing thread is detached and ends with
// the child.
inline void endless_fifo(const std::filesystem::path& path, std::string pattern, std::string head = "") {
  std::filesystem::remove(path);
  ::mkfifo(path.c_str(), 0600);
  std::thread([path, pattern = std::move(pattern), head = std::move(head)] {
    const int fd = ::open(path.c_str(), O_WRONLY);
    std::string block = head;
    while (fd >= 0 && ::write(fd, block.data(), block.size()) >= 0) {
      block.clear();
      while (block.size() < (std::size_t{1} << 16)) block += pattern;
    }
  }).detach();
}

}  // namespace asgd::testing
