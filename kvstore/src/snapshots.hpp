// The server's snapshot replies that did not fit their peer's pipe at once (server.hpp, "Bounds",
// snapshots): each waits as the list of the messages it still has to send, taken when the peer
// asked, so the peer gets a consistent snapshot at the sequence of its KTHXBAI however long it
// takes to read it. Private to the kvstore library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "sectorflow/kvstore/kvmsg.hpp"

namespace sectorflow::kvstore::detail {

class SnapshotReplies {
 public:
  using Clock = std::chrono::steady_clock;
  /// Told why a reply was dropped ("<peer>: why"), once per dropped reply.
  using Dropped = std::function<void(const std::string& why)>;

  /// `router` is the ROUTER with ZMQ_ROUTER_MANDATORY; `max_waiting` replies may wait at once; one
  /// whose peer read nothing for `stall` is dropped.
  SnapshotReplies(zmq::socket_ref router, std::size_t max_waiting, Clock::duration stall, Dropped dropped);

  /// Answers `identity`: `entries` (KVSYNCs) then `end` (KTHXBAI), as far as its pipe takes them now;
  /// the rest waits. Drops the peer's older waiting reply, or the most stalled one if
  /// max_waiting wait already. Returns true if the reply went out whole at once.
  bool answer(std::string identity, std::vector<std::shared_ptr<const KvMsg>> entries, KvMsg end,
              Clock::time_point now);
  /// Sends what the peers' pipes take of the waiting replies; drops the stalled ones and those of
  /// peers that left. Returns the number of replies that went out whole in this call.
  std::uint64_t pump(Clock::time_point now);
  bool empty() const { return waiting_.empty(); }

 private:
  struct Reply {
    std::vector<std::shared_ptr<const KvMsg>> entries;
    KvMsg end;
    std::size_t next = 0;  ///< entries[next] (or end, at entries.size()) is the next message to send
    Clock::time_point progress;  ///< when the peer's pipe last took a message
  };
  enum class Sent { kWhole, kWaiting, kPeerGone };

  Sent send(const std::string& identity, Reply& reply, Clock::time_point now);
  void drop(std::map<std::string, Reply>::iterator reply, const std::string& why);

  zmq::socket_ref router_;
  std::size_t max_waiting_;
  Clock::duration stall_;
  Dropped dropped_;
  std::map<std::string, Reply> waiting_;  // by peer identity
};

}  // namespace sectorflow::kvstore::detail
