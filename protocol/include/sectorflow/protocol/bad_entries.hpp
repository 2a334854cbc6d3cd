// The entries a list reader skipped (schema.hpp, "Readers of a list"), reported once each: a
// producer that reads nodegroups/ at every scan, or a status table refreshed every second, logs a
// bad key when it first sees it (or when its reason changes), not at every read, and counts it once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace sectorflow::protocol {

class BadEntries {
 public:
  /// The entries of `rejected` (key -> why) not reported yet with that reason: the caller logs
  /// them. Keys under `prefix` reported before but absent from `rejected` are forgotten (fixed or
  /// deleted), so they are reported again if they turn bad again. Thread-safe.
  std::map<std::string, std::string> note(std::string_view prefix, const std::map<std::string, std::string>& rejected);
  /// Bad entries reported so far, each key once per reason: the `bad_records` a service publishes.
  std::uint64_t count() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::string> reported_;  // key -> the reason last reported
  std::uint64_t count_ = 0;
};

}  // namespace sectorflow::protocol
