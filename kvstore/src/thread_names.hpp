// The names a scan's parts and the services' statuses give their threads: a producer thread
// r<receiver>t<thread>, a relay thread t<r> (protocol/SPEC.md, "Keys"). Read by the write policy
// (a producer key named for one receiver) and the server (a part must name what its request has).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

namespace sectorflow::kvstore::detail {

/// The number after `letter` at the start of `text` ("t3" -> 3), or nothing; the rest of `text`
/// past the digits goes to `rest` (which must be empty when `rest` is null).
inline std::optional<std::uint32_t> parse_index(std::string_view text, char letter,
                                                std::string_view* rest = nullptr) {
  if (text.empty() || text[0] != letter) return std::nullopt;
  std::uint32_t value = 0;
  const char* begin = text.data() + 1;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop == begin) return std::nullopt;
  const std::string_view left(stop, static_cast<std::size_t>(end - stop));
  if (rest == nullptr) return left.empty() ? std::optional<std::uint32_t>(value) : std::nullopt;
  *rest = left;
  return value;
}

/// A producer thread's name, r<receiver>t<thread>, as (receiver, thread); nothing for another name.
inline std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_thread_name(std::string_view name) {
  std::string_view rest;
  const auto receiver = parse_index(name, 'r', &rest);
  if (!receiver) return std::nullopt;
  const auto thread = parse_index(rest, 't');
  if (!thread) return std::nullopt;
  return std::make_pair(*receiver, *thread);
}

}  // namespace sectorflow::kvstore::detail
