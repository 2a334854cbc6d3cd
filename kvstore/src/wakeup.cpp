#include "sectorflow/kvstore/wakeup.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace sectorflow::kvstore {

Wakeup::Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "kvstore: cannot create an eventfd");
}

Wakeup::~Wakeup() { ::close(fd_); }

void Wakeup::notify() const noexcept {
  const int saved_errno = errno;  // a signal handler must leave errno as it found it
  const std::uint64_t one = 1;
  // A full counter (2^64 - 2 pending wakeups) is still readable, so a failed write loses nothing.
  const ssize_t written = ::write(fd_, &one, sizeof one);
  (void)written;
  errno = saved_errno;
}

void Wakeup::drain() const noexcept {
  std::uint64_t count = 0;
  const ssize_t read = ::read(fd_, &count, sizeof count);
  (void)read;
}

}  // namespace sectorflow::kvstore
