#include "sectorflow/protocol/bad_entries.hpp"

#include <iterator>

namespace sectorflow::protocol {

std::map<std::string, std::string> BadEntries::note(std::string_view prefix,
                                                    const std::map<std::string, std::string>& rejected) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = reported_.lower_bound(std::string(prefix));
       it != reported_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;) {
    it = rejected.count(it->first) != 0 ? std::next(it) : reported_.erase(it);
  }
  std::map<std::string, std::string> fresh;
  for (const auto& [key, why] : rejected) {
    auto [found, inserted] = reported_.try_emplace(key, why);
    if (!inserted && found->second == why) continue;
    found->second = why;
    fresh.emplace(key, why);
    ++count_;
  }
  return fresh;
}

std::uint64_t BadEntries::count() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

}  // namespace sectorflow::protocol
