// Service discovery for the relay threads: a kvstore replica of nodegroups/ and a generation
// number that moves on every change, so a thread notices a NodeGroup leaving or joining with one
// relaxed load per message.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/protocol/bad_entries.hpp"
#include "sectorflow/kvstore/client.hpp"

namespace sectorflow::aggregator::detail {

class Directory {
 public:
  explicit Directory(kvstore::ClientOptions options);
  ~Directory();
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;

  /// Where aggregator thread `thread` reaches NodeGroup `uid` ("tcp://host:port"), or nullopt if
  /// the uid is not registered or its record has no port for this thread.
  std::optional<std::string> endpoint(const std::string& uid, std::size_t thread) const;
  /// The uids of the NodeGroups registered with a port for `thread`, sorted: the routing list a
  /// native scan gets when nobody asked for one (SPEC.md, "Two dialects").
  std::vector<std::string> registered(std::size_t thread) const;
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  /// Waits until the generation differs from `seen` or the deadline passes.
  void wait_change(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const;
  /// Reads every registration and reports, once each through the replica's log function, those
  /// that do not decode: their NodeGroups count as absent, and an operator must learn why.
  void audit() const;
  /// Waits until the replica is complete and live or the timeout passes; returns whether it is.
  bool wait_synced(std::chrono::milliseconds timeout) const { return client_.wait_synced(timeout); }
  /// Bad registrations reported so far (published as bad_records).
  std::uint64_t bad_records() const { return bad_.count(); }
  void close();

 private:
  kvstore::Client client_;
  mutable protocol::BadEntries bad_;  // reporting what was read does not change what is known
  std::atomic<std::uint64_t> generation_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
};

}  // namespace sectorflow::aggregator::detail
