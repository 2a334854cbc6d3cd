#include "sectorflow/kvstore/stack_id.hpp"

#include <cstdint>
#include <random>
#include <variant>

namespace sectorflow::kvstore {

std::string new_stack_id() {
  // Seeded per call: two servers started in the same instant must not share an id.
  std::mt19937_64 generator{(std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  std::uint64_t bits = generator();
  std::string id(kStackIdChars, '0');
  for (std::size_t i = kStackIdChars; i-- > 0; bits >>= 4) id[i] = "0123456789abcdef"[bits & 0xfU];
  return id;
}

std::string stack_id_of(const protocol::ServiceStatus& server_status) {
  const auto found = server_status.extra.find(std::string(kStackIdField));
  if (found == server_status.extra.end()) return {};
  const auto* id = std::get_if<std::string>(&found->second);
  return id != nullptr && is_stack_id(*id) ? *id : std::string();
}

void set_stack_fields(protocol::ServiceStatus& status, const StackIdentity& stack) {
  const std::string id_field(kStackIdField);
  const std::string changed_field(kStackChangedField);
  if (stack.id.empty()) {
    status.extra.erase(id_field);
  } else {
    status.extra[id_field] = stack.id;
  }
  if (stack.changed()) {
    status.extra[changed_field] = stack.first;
  } else {
    status.extra.erase(changed_field);
  }
}

}  // namespace sectorflow::kvstore
