#include "snapshots.hpp"

#include <algorithm>
#include <cerrno>

#include "sectorflow/protocol/text.hpp"

namespace sectorflow::kvstore::detail {

SnapshotReplies::SnapshotReplies(zmq::socket_ref router, std::size_t max_waiting, Clock::duration stall,
                                 Dropped dropped)
    : router_(router), max_waiting_(max_waiting), stall_(stall), dropped_(std::move(dropped)) {}

bool SnapshotReplies::answer(std::string identity, std::vector<std::shared_ptr<const KvMsg>> entries, KvMsg end,
                             Clock::time_point now) {
  if (const auto older = waiting_.find(identity); older != waiting_.end()) {
    drop(older, "asked again before reading the last snapshot");
  }
  Reply reply{std::move(entries), std::move(end), 0, now};
  const Sent sent = send(identity, reply, now);
  if (sent == Sent::kWhole) return true;
  if (sent == Sent::kPeerGone) {
    if (dropped_) dropped_("peer " + protocol::shown(identity) + " left before its snapshot was sent");
    return false;
  }
  if (waiting_.size() >= max_waiting_) {
    const auto most_stalled = std::min_element(waiting_.begin(), waiting_.end(), [](const auto& a, const auto& b) {
      return a.second.progress < b.second.progress;
    });
    drop(most_stalled, "dropped for a newer request: " + std::to_string(max_waiting_) + " snapshots were waiting");
  }
  waiting_.emplace(std::move(identity), std::move(reply));
  return false;
}

std::uint64_t SnapshotReplies::pump(Clock::time_point now) {
  std::uint64_t whole = 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const Sent sent = send(it->first, it->second, now);
    if (sent == Sent::kWhole) {
      ++whole;
      it = waiting_.erase(it);
    } else if (sent == Sent::kPeerGone) {
      const auto gone = it++;
      drop(gone, "left before its snapshot was sent");
    } else if (now - it->second.progress > stall_) {
      const auto stalled = it++;
      drop(stalled, "read nothing of its snapshot for " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(stall_).count()) + " ms");
    } else {
      ++it;
    }
  }
  return whole;
}

SnapshotReplies::Sent SnapshotReplies::send(const std::string& identity, Reply& reply, Clock::time_point now) {
  const std::vector<std::string> prefix{identity};
  try {
    for (; reply.next <= reply.entries.size(); ++reply.next) {
      const KvMsg& msg = reply.next < reply.entries.size() ? *reply.entries[reply.next] : reply.end;
      if (!send_kvmsg(router_, msg, prefix)) return Sent::kWaiting;  // the peer's pipe is full
      reply.progress = now;
    }
  } catch (const zmq::error_t& error) {
    if (error.num() == EHOSTUNREACH) return Sent::kPeerGone;  // ZMQ_ROUTER_MANDATORY: no such peer (any more)
    throw;
  }
  return Sent::kWhole;
}

void SnapshotReplies::drop(std::map<std::string, Reply>::iterator reply, const std::string& why) {
  const std::string text = "peer " + protocol::shown(reply->first) + ": " + why + " (" + std::to_string(reply->second.next) +
                           " of " + std::to_string(reply->second.entries.size() + 1) + " messages sent)";
  waiting_.erase(reply);
  if (dropped_) dropped_(text);
}

}  // namespace sectorflow::kvstore::detail
