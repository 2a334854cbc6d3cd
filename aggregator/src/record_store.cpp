#include "record_store.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/scan_summary.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace sectorflow::aggregator::detail {
namespace {

kvstore::ClientOptions scans_only(kvstore::ClientOptions options) {
  options.subtree = std::string(protocol::kScansPrefix);
  return options;
}

}  // namespace

RecordStore::RecordStore(kvstore::ClientOptions options, double ttl_s)
    : client_(scans_only(std::move(options))), ttl_s_(ttl_s) {}

RecordStore::~RecordStore() { close(); }

std::map<std::string, std::string> RecordStore::parts(std::uint32_t scan, const std::string& prefix) const {
  // A scan over is folded into its summary (kvstore/SPEC.md, "Folding"): its parts are read from
  // there, and a key written since replaces the folded part, as the readers of the account do.
  std::map<std::string, std::string> out;
  if (const std::optional<std::string> summary = client_.get(protocol::summary_key(scan))) {
    try {
      out = protocol::folded_keys(scan, *summary, protocol::part_of(scan, prefix));
    } catch (const protocol::ProtocolError& error) {
      for (const auto& [key, why] : bad_.note(protocol::summary_key(scan), {{protocol::summary_key(scan), error.what()}})) {
        if (client_.options().log) client_.options().log("skipped the scan record " + key + ": " + why);
      }
    }
  }
  for (auto& [key, value] : client_.subtree(prefix)) out[key] = std::move(value);
  return out;
}

void RecordStore::close() { client_.close(); }

std::vector<protocol::ProducerScanRecord> RecordStore::producer_records(std::uint32_t scan, std::uint32_t receiver,
                                                                        std::chrono::milliseconds sync_wait) const {
  if (!client_.synced()) (void)client_.wait_synced(sync_wait);
  // scans/<n>/producer/r<R>t<T>: every thread of receiver R shares the prefix up to "t".
  const std::string prefix = protocol::scan_prefix(scan) + "producer/r" + std::to_string(receiver) + "t";
  std::vector<protocol::ProducerScanRecord> out;
  std::map<std::string, std::string> rejected;
  for (const auto& [key, value] : parts(scan, prefix)) {
    try {
      protocol::ProducerScanRecord record = protocol::ProducerScanRecord::decode(value);
      if (record.receiver != receiver || record.routing.empty()) continue;  // another's, or written to disk
      if (key != protocol::scan_producer_key(scan, record.receiver, record.thread)) continue;  // a key it does not own
      out.push_back(std::move(record));
    } catch (const protocol::ProtocolError& error) {
      rejected[key] = error.what();
    }
  }
  // Every message of such a scan looks again: say it once per key and reason.
  for (const auto& [key, why] : bad_.note(prefix, rejected)) {
    if (client_.options().log) client_.options().log("skipped the scan record " + key + ": " + why);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.thread < b.thread; });
  return out;
}

std::optional<std::uint64_t> RecordStore::aborted_sent(std::uint32_t scan, std::uint32_t receiver,
                                                      std::uint32_t threads, std::uint32_t member) const {
  // Written by `sectorflow abort` (protocol/scan_life.py); its presence is the abort.
  if (parts(scan, protocol::scan_prefix(scan) + "abort").empty()) return std::nullopt;
  const std::string finished(protocol::to_string(protocol::ServiceState::kFinished));
  const std::string error(protocol::to_string(protocol::ServiceState::kError));
  std::vector<bool> done(threads, false);
  std::uint64_t sent = 0;
  const std::string prefix = protocol::scan_prefix(scan) + "producer/r" + std::to_string(receiver) + "t";
  for (const auto& [key, value] : parts(scan, prefix)) {
    try {
      const protocol::ProducerScanRecord record = protocol::ProducerScanRecord::decode(value);
      if (record.receiver != receiver || record.thread >= threads || done[record.thread]) continue;
      if (key != protocol::scan_producer_key(scan, record.receiver, record.thread)) continue;
      if (record.state != finished && record.state != error) return std::nullopt;  // still sending
      done[record.thread] = true;
      sent += record.sent_to(member);  // what went through this member of the tier
    } catch (const protocol::ProtocolError&) {
      // producer_records() reports it; here it is a thread not known to be done.
    }
  }
  if (!std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return std::nullopt;
  return sent;
}

std::optional<protocol::RelayScanRecord> RecordStore::relay_record(std::uint32_t scan, std::uint32_t thread) const {
  const std::string key = protocol::scan_relay_key(scan, thread);
  const auto found = parts(scan, key);
  const std::optional<std::string> value =
      found.count(key) != 0 ? std::optional<std::string>(found.at(key)) : std::nullopt;
  if (!value) return std::nullopt;
  try {
    return protocol::RelayScanRecord::decode(*value);
  } catch (const protocol::ProtocolError&) {
    return std::nullopt;  // nothing to carry over from a record that does not decode
  }
}

std::optional<protocol::ScanRequestRecord> RecordStore::request_record(std::uint32_t scan) const {
  const std::string key = protocol::scan_request_key(scan);
  const auto found = parts(scan, key);
  const std::optional<std::string> value =
      found.count(key) != 0 ? std::optional<std::string>(found.at(key)) : std::nullopt;
  if (!value) return std::nullopt;
  std::map<std::string, std::string> rejected;
  try {
    return protocol::ScanRequestRecord::decode(*value);
  } catch (const protocol::ProtocolError& error) {
    rejected[key] = error.what();
  }
  for (const auto& [bad, why] : bad_.note(key, rejected)) {
    if (client_.options().log) client_.options().log("skipped the scan record " + bad + ": " + why);
  }
  return std::nullopt;
}

void RecordStore::write(const protocol::ScanRequestRecord& record) {
  client_.set_once(protocol::scan_request_key(record.scan_number), record.encode(), ttl_s_);
}

void RecordStore::write(std::uint32_t scan, const protocol::RelayScanRecord& record) {
  client_.set_once(protocol::scan_relay_key(scan, record.thread), record.encode(), ttl_s_);
}

}  // namespace sectorflow::aggregator::detail
