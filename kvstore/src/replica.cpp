#include "replica.hpp"

namespace sectorflow::kvstore::detail {

Replica::Replica(std::function<void(const std::string&)> report) : report_(std::move(report)) {}

std::optional<std::string> Replica::get(const std::string& key) const {
  const std::shared_lock<std::shared_mutex> lock(mutex_);
  const auto found = entries_.find(key);
  if (found == entries_.end()) return std::nullopt;
  return found->second;
}

std::map<std::string, std::string> Replica::subtree(const std::string& prefix) const {
  const std::shared_lock<std::shared_mutex> lock(mutex_);
  std::map<std::string, std::string> out;
  for (auto it = entries_.lower_bound(prefix); it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    out.insert(*it);
  }
  return out;
}

std::int64_t Replica::sequence() const {
  const std::shared_lock<std::shared_mutex> lock(mutex_);
  return sequence_;
}

std::uint64_t Replica::add_callback(std::string prefix, ChangeCallback callback) {
  const std::lock_guard<std::mutex> lock(callbacks_mutex_);
  const std::uint64_t id = next_id_++;
  callbacks_.push_back({id, std::move(prefix), std::make_shared<ChangeCallback>(std::move(callback))});
  return id;
}

void Replica::remove_callback(std::uint64_t id) {
  const std::lock_guard<std::mutex> lock(callbacks_mutex_);
  for (auto it = callbacks_.begin(); it != callbacks_.end(); ++it) {
    if (it->id == id) {
      callbacks_.erase(it);
      return;
    }
  }
}

void Replica::apply(const std::string& key, const std::string& body, std::int64_t sequence) {
  std::vector<Change> changes;
  {
    const std::unique_lock<std::shared_mutex> lock(mutex_);
    sequence_ = sequence;
    const auto found = entries_.find(key);
    if (body.empty()) {
      if (found != entries_.end()) {
        entries_.erase(found);
        changes.emplace_back(key, std::nullopt);
      }
    } else if (found == entries_.end() || found->second != body) {
      entries_[key] = body;
      changes.emplace_back(key, body);
    }
  }
  notify(changes);
}

void Replica::advance(std::int64_t sequence) {
  const std::unique_lock<std::shared_mutex> lock(mutex_);
  sequence_ = sequence;
}

void Replica::replace(std::map<std::string, std::string> entries, std::int64_t sequence) {
  std::vector<Change> changes;
  {
    const std::unique_lock<std::shared_mutex> lock(mutex_);
    for (const auto& [key, value] : entries_) {
      if (entries.count(key) == 0) changes.emplace_back(key, std::nullopt);
    }
    for (const auto& [key, value] : entries) {
      const auto found = entries_.find(key);
      if (found == entries_.end() || found->second != value) changes.emplace_back(key, value);
    }
    entries_ = std::move(entries);
    sequence_ = sequence;
  }
  notify(changes);
}

void Replica::notify(const std::vector<Change>& changes) const {
  if (changes.empty()) return;
  // Call a copy of the list, outside the lock: a callback may (un)register callbacks.
  std::vector<Callback> callbacks;
  {
    const std::lock_guard<std::mutex> lock(callbacks_mutex_);
    callbacks = callbacks_;
  }
  for (const auto& [key, value] : changes) {
    for (const Callback& callback : callbacks) {
      if (key.compare(0, callback.prefix.size(), callback.prefix) != 0) continue;
      try {
        (*callback.function)(key, value);
      } catch (const std::exception& error) {
        report_("change callback for '" + callback.prefix + "' failed on key '" + key + "': " + error.what());
      } catch (...) {
        report_("change callback for '" + callback.prefix + "' failed on key '" + key + "'");
      }
    }
  }
}

}  // namespace sectorflow::kvstore::detail
