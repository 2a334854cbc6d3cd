// Threads this project starts inside a process whose main thread handles signals (every service
// is a Python program, and Python runs its signal handlers on its main thread only).
#pragma once

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>

#include <pthread.h>

namespace sectorflow::protocol {

/// A std::thread running `function` that never receives an asynchronous signal (SIGINT, SIGTERM):
/// the kernel delivers a process-directed signal to any thread that does not block it, and one
/// delivered to a worker leaves the main thread asleep in its wait, so that a Ctrl-C took effect
/// only when that wait ended. libzmq blocks signals in its own I/O threads for the same reason.
/// The mask is inherited at creation, so it is set around it and restored in this thread.
/// `name` (at most 15 characters: the kernel's limit) is what `top -H`, `ps -L` and perf show for
/// the thread, where every thread of a Python service would otherwise be "python".
template <typename Function>
std::thread start_worker_thread(std::string name, Function&& function) {
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  struct Restore {
    const sigset_t& mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  std::thread thread(std::forward<Function>(function));
  // Named from here, not by the thread itself, so that it has its name once this returns.
  name.resize(std::min<std::size_t>(name.size(), 15));
  pthread_setname_np(thread.native_handle(), name.c_str());
  return thread;
}

}  // namespace sectorflow::protocol
