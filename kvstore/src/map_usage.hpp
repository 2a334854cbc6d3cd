// What the clients' keys take of the server's map, in all and per network address, against the
// limits of ServerOptions (server.hpp, "Bounds", the map). Private to the kvstore library.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace sectorflow::kvstore::detail {

struct MapLimits {
  std::size_t max_keys = 0;
  std::size_t max_bytes = 0;
  std::size_t max_keys_per_address = 0;
  std::size_t max_bytes_per_address = 0;
};

class MapUsage {
 public:
  /// A key held: who wrote it last and its bytes (key + properties + body).
  struct Held {
    std::string address;
    std::size_t bytes = 0;
  };
  enum class Verdict { kAccepted, kOverQuota, kFull };

  explicit MapUsage(MapLimits limits) : limits_(limits) {}

  /// Whether `address` may set a key to a value of `bytes`, replacing `old` (nullptr for a new key).
  /// Never refuses what takes no more than before: a refresh by the holder, or a smaller value.
  Verdict check(const std::string& address, std::size_t bytes, const Held* old) const;
  /// Charges a key to its writer, after check() accepted it; `old` is released.
  void charge(const Held& held, const Held* old);
  /// Releases a deleted or expired key.
  void release(const Held& held);

  std::size_t keys() const { return keys_; }
  std::size_t bytes() const { return bytes_; }
  /// A description of the limit `verdict` met, for the refusal's log line.
  std::string why(Verdict verdict, const std::string& address) const;

 private:
  struct Account {
    std::size_t keys = 0;
    std::size_t bytes = 0;
  };

  MapLimits limits_;
  std::size_t keys_ = 0;
  std::size_t bytes_ = 0;
  std::map<std::string, Account> accounts_;  // only addresses that hold keys: bounded by the map
};

}  // namespace sectorflow::kvstore::detail
