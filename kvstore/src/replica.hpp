// The client's local copy of the map: read by any thread under a shared lock, changed only by the
// agent, which then calls the change callbacks registered for the changed keys' prefixes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "sectorflow/kvstore/client.hpp"

namespace sectorflow::kvstore::detail {

class Replica {
 public:
  /// `report` hears about exceptions thrown by callbacks (they never reach the agent).
  explicit Replica(std::function<void(const std::string&)> report);

  std::optional<std::string> get(const std::string& key) const;
  std::map<std::string, std::string> subtree(const std::string& prefix) const;
  std::int64_t sequence() const;

  std::uint64_t add_callback(std::string prefix, ChangeCallback callback);
  void remove_callback(std::uint64_t id);

  /// Agent only: sets (non-empty body) or deletes (empty body) a key at `sequence`.
  void apply(const std::string& key, const std::string& body, std::int64_t sequence);
  /// Agent only: moves the sequence without changing a key.
  void advance(std::int64_t sequence);
  /// Agent only: becomes `entries` at `sequence`, calling back for every key that changed.
  void replace(std::map<std::string, std::string> entries, std::int64_t sequence);

 private:
  struct Callback {
    std::uint64_t id;
    std::string prefix;
    std::shared_ptr<ChangeCallback> function;
  };
  using Change = std::pair<std::string, std::optional<std::string>>;

  void notify(const std::vector<Change>& changes) const;

  mutable std::shared_mutex mutex_;
  std::map<std::string, std::string> entries_;
  std::int64_t sequence_ = 0;

  mutable std::mutex callbacks_mutex_;
  std::vector<Callback> callbacks_;
  std::uint64_t next_id_ = 1;
  std::function<void(const std::string&)> report_;
};

}  // namespace sectorflow::kvstore::detail
