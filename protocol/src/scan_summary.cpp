#include "sectorflow/protocol/scan_summary.hpp"

#include <msgpack.hpp>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace sectorflow::protocol {

std::string summary_key(std::uint32_t scan) { return scan_prefix(scan) + std::string(kSummaryPart); }

std::string part_of(std::uint32_t scan, const std::string& key) { return key.substr(scan_prefix(scan).size()); }

std::map<std::string, std::string> folded_keys(std::uint32_t scan, std::string_view summary, std::string_view prefix) {
  std::map<std::string, std::string> out;
  for (auto& [part, value] : decode_summary(summary)) {
    if (part.compare(0, prefix.size(), prefix) == 0) out.emplace(scan_prefix(scan) + part, std::move(value));
  }
  return out;
}

std::string encode_summary(const ScanParts& parts, double folded_s) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pack(buffer);
  pack.pack_map(3);
  pack.pack(std::string_view("version"));
  pack.pack(kSummaryVersion);
  pack.pack(std::string_view("folded_s"));
  pack.pack(folded_s);
  pack.pack(std::string_view("parts"));
  pack.pack_map(static_cast<std::uint32_t>(parts.size()));
  for (const auto& [part, value] : parts) {
    pack.pack(part);
    pack.pack_bin(static_cast<std::uint32_t>(value.size()));
    pack.pack_bin_body(value.data(), static_cast<std::uint32_t>(value.size()));
  }
  return {buffer.data(), buffer.size()};
}

ScanParts decode_summary(std::string_view body) {
  const auto fail = [](const std::string& why) { return ProtocolError("ScanSummary: " + why); };
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(body.data(), body.size());
  } catch (const std::exception& error) {
    throw fail(std::string("not msgpack: ") + error.what());
  }
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP) throw fail("not a map");
  ScanParts parts;
  bool versioned = false;
  for (const msgpack::object_kv& field : root.via.map) {
    if (field.key.type != msgpack::type::STR) continue;
    const std::string_view name(field.key.via.str.ptr, field.key.via.str.size);
    if (name == "version") {
      versioned = field.val.type == msgpack::type::POSITIVE_INTEGER && field.val.via.u64 == kSummaryVersion;
    } else if (name == "parts") {
      if (field.val.type != msgpack::type::MAP) throw fail("parts is not a map");
      for (const msgpack::object_kv& part : field.val.via.map) {
        if (part.key.type != msgpack::type::STR || part.val.type != msgpack::type::BIN) {
          throw fail("a part is not a name and its bytes");
        }
        parts.emplace(std::string(part.key.via.str.ptr, part.key.via.str.size),
                      std::string(part.val.via.bin.ptr, part.val.via.bin.size));
      }
    }
  }
  if (!versioned) throw fail("not version " + std::to_string(kSummaryVersion));
  return parts;
}

std::optional<std::string> not_over(const ScanParts& parts) {
  const auto request_part = parts.find("request");
  if (request_part == parts.end()) return "no request record";
  ScanRequestRecord request;
  try {
    request = ScanRequestRecord::decode(request_part->second);
  } catch (const std::exception&) {
    return "its request record does not decode";
  }
  const std::string finished(to_string(ServiceState::kFinished));
  const std::string error(to_string(ServiceState::kError));
  if (request.source != kSourceNative) {
    for (std::size_t receiver = 0; receiver < request.producer_threads.size(); ++receiver) {
      for (std::uint32_t thread = 0; thread < request.producer_threads[receiver]; ++thread) {
        const std::string name = "producer/r" + std::to_string(receiver) + "t" + std::to_string(thread);
        const auto part = parts.find(name);
        if (part == parts.end()) return name + " is not in";
        std::string state;
        try {
          state = ProducerScanRecord::decode(part->second).state;
        } catch (const std::exception&) {
          return name + " does not decode";
        }
        if (state != finished && state != error) return name + " is " + state;
      }
    }
  }
  const bool planned_to_disk = request.routing.empty() && request.source != kSourceNative;
  if (!planned_to_disk && parts.count("file") == 0) return "no file record";
  return std::nullopt;
}

}  // namespace sectorflow::protocol
