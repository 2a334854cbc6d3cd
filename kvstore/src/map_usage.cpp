#include "map_usage.hpp"

namespace sectorflow::kvstore::detail {

MapUsage::Verdict MapUsage::check(const std::string& address, std::size_t bytes, const Held* old) const {
  const bool same_holder = old != nullptr && old->address == address;
  const std::size_t old_bytes = old != nullptr ? old->bytes : 0;
  if (same_holder && bytes <= old_bytes) return Verdict::kAccepted;

  const auto found = accounts_.find(address);
  const Account account = found != accounts_.end() ? found->second : Account{};
  const std::size_t address_keys = account.keys + (same_holder ? 0 : 1);
  const std::size_t address_bytes = account.bytes - (same_holder ? old_bytes : 0) + bytes;
  if (address_keys > limits_.max_keys_per_address || address_bytes > limits_.max_bytes_per_address) {
    return Verdict::kOverQuota;
  }
  const std::size_t keys = keys_ + (old != nullptr ? 0 : 1);
  if (keys > limits_.max_keys || bytes_ - old_bytes + bytes > limits_.max_bytes) return Verdict::kFull;
  return Verdict::kAccepted;
}

void MapUsage::charge(const Held& held, const Held* old) {
  if (old != nullptr) release(*old);
  Account& account = accounts_[held.address];
  ++account.keys;
  account.bytes += held.bytes;
  ++keys_;
  bytes_ += held.bytes;
}

void MapUsage::release(const Held& held) {
  const auto found = accounts_.find(held.address);
  if (found == accounts_.end()) return;
  --found->second.keys;
  found->second.bytes -= held.bytes;
  if (found->second.keys == 0) accounts_.erase(found);
  --keys_;
  bytes_ -= held.bytes;
}

std::string MapUsage::why(Verdict verdict, const std::string& address) const {
  if (verdict == Verdict::kOverQuota) {
    const auto found = accounts_.find(address);
    const Account account = found != accounts_.end() ? found->second : Account{};
    return "address " + address + " holds " + std::to_string(account.keys) + " keys and " +
           std::to_string(account.bytes) + " bytes, its quota is " + std::to_string(limits_.max_keys_per_address) +
           " keys and " + std::to_string(limits_.max_bytes_per_address) +
           " bytes ([kvstore] max_keys_per_address, max_map_bytes_per_address)";
  }
  if (verdict == Verdict::kFull) {
    return "the map holds " + std::to_string(keys_) + " keys and " + std::to_string(bytes_) + " bytes, at most " +
           std::to_string(limits_.max_keys) + " keys and " + std::to_string(limits_.max_bytes) +
           " bytes ([kvstore] max_keys, max_map_bytes)";
  }
  return "accepted";
}

}  // namespace sectorflow::kvstore::detail
