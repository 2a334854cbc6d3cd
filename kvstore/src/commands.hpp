// The frontend -> agent command queue: a mutex-guarded deque plus an eventfd that wakes the
// agent's poll. push() holds the mutex for a deque insertion only: the caller never waits on the
// network.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/wakeup.hpp"

namespace sectorflow::kvstore::detail {

struct Command {
  enum class Kind { kSet, kSetOnce, kErase, kClose };
  Kind kind;
  std::string key;
  std::string value;
  double ttl_s = 0.0;
  bool create = false;  ///< kSetOnce: the server takes it only if the key is absent
};

class CommandQueue {
 public:
  /// Queues a command and wakes the agent; throws KvstoreError once a kClose was pushed.
  void push(Command command) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) throw KvstoreError("kvstore client is closed; create a new Client to write keys");
      closed_ = command.kind == Command::Kind::kClose;
      commands_.push_back(std::move(command));
    }
    wakeup_.notify();
  }

  /// True once a kClose was pushed.
  bool closed() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }

  /// Everything queued so far, oldest first.
  std::deque<Command> take() {
    wakeup_.drain();
    const std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(commands_, {});
  }

  int fd() const { return wakeup_.fd(); }

 private:
  mutable std::mutex mutex_;
  std::deque<Command> commands_;
  bool closed_ = false;
  Wakeup wakeup_;
};

}  // namespace sectorflow::kvstore::detail
