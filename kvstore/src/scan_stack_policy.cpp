// sectorflow's StackPolicy (stack_policy.hpp): the stack's records and its scans as the store sees
// them. Each scan's keys are one group, folded into scans/<n>/summary once the scan is over
// (kvstore/SPEC.md, "Folding"); who may write which key is write_policy.hpp's table, and, for a
// scan's parts and its file record, what the scan's request says (kvstore/SPEC.md, "Security").
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sectorflow/kvstore/stack_policy.hpp"
#include "sectorflow/protocol/records.hpp"
#include "sectorflow/protocol/scan_records.hpp"
#include "sectorflow/protocol/scan_summary.hpp"
#include "thread_names.hpp"
#include "write_policy.hpp"

namespace sectorflow::kvstore {
namespace {

using protocol::summary_key;

// The scan of a scan record's key (or of a scan's prefix), or nothing for any other key.
std::optional<std::uint32_t> scan_of(const std::string& key) {
  if (key.compare(0, protocol::kScansPrefix.size(), protocol::kScansPrefix) != 0) return std::nullopt;
  try {
    return protocol::parse_scan_key(key);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

class ScanStackPolicy final : public StackPolicy {
 public:
  explicit ScanStackPolicy(std::vector<std::uint32_t> producer_threads)
      : producer_threads_(std::move(producer_threads)) {}

  bool reserved(const std::string& key) const override {
    for (const std::string_view prefix : {protocol::kNodegroupsPrefix, protocol::kStatusPrefix,
                                          protocol::kAcquirePrefix, protocol::kScansPrefix}) {
      if (key.compare(0, prefix.size(), prefix) == 0) return true;
    }
    return false;
  }

  std::string group_of(const std::string& key) const override {
    const std::optional<std::uint32_t> scan = scan_of(key);
    return scan ? protocol::scan_prefix(*scan) : std::string();
  }

  std::string fold_key(const std::string& group) const override { return summary_key(protocol::parse_scan_key(group)); }

  // A scan folded before takes a part written since into its summary, unless a new run of it began
  // (its request written again, a replay), which folds when that run is over (scan_summary.hpp,
  // not_over).
  std::optional<std::string> fold(const std::string& group, const StoreView& map) const override {
    protocol::ScanParts live;
    const protocol::ScanParts whole = parts_of(protocol::parse_scan_key(group), map, &live);
    if (live.empty()) return std::nullopt;
    const bool folded = map.find(fold_key(group)).has_value();
    if (folded && live.count("request") != 0 && live.count("file") == 0 && protocol::not_over(live)) {
      return std::nullopt;
    }
    if (protocol::not_over(whole)) return std::nullopt;
    return protocol::encode_summary(whole, protocol::wall_clock_s());
  }

  // A claim folded away still holds its number.
  bool folded(const std::string& key, const StoreView& map) const override {
    const std::optional<std::uint32_t> scan = scan_of(key);
    if (!scan) return false;
    const auto summary = map.find(summary_key(*scan));
    if (!summary) return false;
    return protocol::decode_summary(summary->body).count(key.substr(protocol::scan_prefix(*scan).size())) != 0;
  }

  // A scan replayed since it was folded (its request is back) keeps its new parts, which are not over.
  bool keeps_live_keys(const std::string& group, const StoreView& map) const override {
    return map.find(protocol::scan_request_key(protocol::parse_scan_key(group))).has_value();
  }

  // The summary is the server's fold of parts each written by the party allowed to: a client's
  // would claim an account nobody wrote, or erase a scan's parts (kvstore/SPEC.md, "Folding").
  std::string server_only(const std::string& key) const override {
    const std::optional<std::uint32_t> scan = scan_of(key);
    if (!scan || key != summary_key(*scan)) return {};
    return "only the kvstore server writes a scan's summary, when it folds the scan's parts";
  }

  std::string write_refusal(const std::string& identity, const std::string& key, const std::string& holder,
                            bool deletion, const StoreView& map) const override {
    std::string why = detail::write_refusal(identity, key, holder);
    if (why.empty()) why = file_record_refusal(identity, key, map);
    if (why.empty() && !deletion) why = scan_part_refusal(key, map);
    if (why.empty() && !deletion) why = detail::status_refusal(key, producer_threads_);
    return why;
  }

  bool votes(const std::string& identity) const override {
    const std::string role = identity.substr(0, identity.find('/'));
    return role == "producer" || role == "aggregator" || role == "nodegroup" || role == "operator";
  }

 private:
  // The parts of `scan` a summary holds (none without one), and its live keys over them: a part
  // written after the fold replaces the folded one, as it would replace the key.
  static protocol::ScanParts parts_of(std::uint32_t scan, const StoreView& map, protocol::ScanParts* live) {
    protocol::ScanParts found;
    const std::string prefix = protocol::scan_prefix(scan);
    const std::string summary = summary_key(scan);
    if (const auto folded = map.find(summary)) found = protocol::decode_summary(folded->body);
    map.visit(prefix, [&](const std::string& key, const StoreView::Value& value) {
      if (key == summary) return true;
      const std::string part = key.substr(prefix.size());
      if (live != nullptr) (*live)[part] = std::string(value.body);
      found[part] = std::string(value.body);
      return true;
    });
    return found;
  }

  // The body of `scan`'s request record: its key, or the part its summary folded (nothing if neither).
  static std::optional<std::string> request_of(std::uint32_t scan, const StoreView& map) {
    const std::string key = protocol::scan_request_key(scan);
    if (const auto request = map.find(key)) return std::string(request->body);
    if (const auto summary = map.find(summary_key(scan))) {
      protocol::ScanParts folded_parts = protocol::decode_summary(summary->body);
      const auto folded = folded_parts.find(key.substr(protocol::scan_prefix(scan).size()));
      if (folded != folded_parts.end()) return std::move(folded->second);
    }
    return std::nullopt;
  }

  // Why `identity` may not write `key` when it is a scan's file record: only the NodeGroup job the
  // scan's routing named writes it (kvstore/SPEC.md, "Security"), and never before the scan was
  // requested (a file record waiting for a scan would turn its NodeGroups' data away). A job is known
  // by the identity that holds its NodeGroups' registrations; a scan with no routing list (producers
  // route over every registration) takes the file of any job that holds a registration.
  static std::string file_record_refusal(const std::string& identity, const std::string& key, const StoreView& map) {
    const std::optional<std::uint32_t> part_of = scan_of(key);
    if (!part_of) return {};
    const std::uint32_t scan = *part_of;
    if (key != protocol::scan_file_key(scan)) return {};
    std::vector<std::string> routing;
    try {
      const std::optional<std::string> request = request_of(scan, map);
      if (!request) return "the scan has no request record: nobody routed it to a job that could write its file";
      routing = protocol::ScanRequestRecord::decode(*request).routing;
    } catch (const std::exception&) {
      return "the scan's request record does not decode, so no job can be named its writer";
    }
    if (routing.empty()) {
      bool holds_one = false;
      map.visit(std::string(protocol::kNodegroupsPrefix), [&](const std::string&, const StoreView::Value& value) {
        holds_one = value.writer == identity;
        return !holds_one;
      });
      return holds_one ? std::string() : std::string("the writer holds no NodeGroup registration");
    }
    for (const std::string& uid : routing) {
      const auto registration = map.find(std::string(protocol::kNodegroupsPrefix) + uid);
      if (registration && registration->writer == identity) return {};
    }
    return "the scan's routing names no NodeGroup " + identity + " holds (only the job it was routed to writes its file)";
  }

  // Why `key`, a part of a scan's record, names what the scan does not have: a scan never requested,
  // a producer thread or relay thread outside the request's receivers and threads, a NodeGroup
  // outside its routing. With [security] on, where each part's writer is known: one producer key
  // wrote 2.26 million records for a receiver 9 that did not exist, and the room they took evicted
  // the stack's history. Deletions are a holder's own business (the held rule).
  static std::string scan_part_refusal(const std::string& key, const StoreView& map) {
    const std::optional<std::uint32_t> part_of = scan_of(key);
    if (!part_of) return {};
    const std::uint32_t scan = *part_of;
    const std::string_view rest = std::string_view(key).substr(protocol::scan_prefix(scan).size());
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return {};
    const std::string_view kind = rest.substr(0, slash);
    const std::string_view name = rest.substr(slash + 1);
    if (kind != "producer" && kind != "aggregator" && kind != "nodegroup") return {};
    protocol::ScanRequestRecord request;
    try {
      const std::optional<std::string> body = request_of(scan, map);
      if (!body) return "scan " + std::to_string(scan) + " has no request record: nothing has a part of it yet";
      request = protocol::ScanRequestRecord::decode(*body);
    } catch (const std::exception&) {
      return "the scan's request record does not decode, so no part of it can be judged";
    }
    const std::vector<std::uint32_t>& threads = request.producer_threads;
    if (kind == "producer") {
      const auto thread = detail::parse_thread_name(name);
      if (!thread || thread->first >= threads.size() || thread->second >= threads[thread->first]) {
        return "the scan's request names no producer thread " + std::string(name) + " (" +
               std::to_string(threads.size()) + " receivers)";
      }
    } else if (kind == "aggregator") {
      // Relay thread j of the tier: member j / receivers, receiver j % receivers.
      const auto relay = detail::parse_index(name, 't');
      if (!relay || threads.empty() || !request.carried_by(static_cast<std::uint32_t>(*relay / threads.size()))) {
        return "the scan's request names no relay thread " + std::string(name) + " (" + std::to_string(threads.size()) +
               " receivers, and not that member of the aggregation tier)";
      }
    } else if (!request.routing.empty() &&
               std::find(request.routing.begin(), request.routing.end(), name) == request.routing.end()) {
      return "the scan's routing names no NodeGroup " + std::string(name);
    }
    return {};
  }

  std::vector<std::uint32_t> producer_threads_;
};

}  // namespace

std::unique_ptr<const StackPolicy> scan_stack_policy(std::vector<std::uint32_t> producer_threads) {
  return std::make_unique<const ScanStackPolicy>(std::move(producer_threads));
}

}  // namespace sectorflow::kvstore
