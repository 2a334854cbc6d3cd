// The store's durable records (store.hpp; kvstore/SPEC.md, "Durable records"): what it appends to
// its RecordLog, how a loaded or mirrored record becomes an entry of the map again, and the
// compactions. A write that fails is counted and the store serves on from memory.
#include <algorithm>
#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "store.hpp"

namespace sectorflow::kvstore::detail {

void Store::load_log() {
  log.emplace(options.log);
  stack_id = log->keep_stack_id(stack_id);  // a restart with its log is the same stack
  const LogLoad load = log->load([this](LogRecord&& record) { restore(std::move(record)); });
  sequence = std::max(sequence, load.sequence);
  count([&load](ServerStats& st) {
    st.log_records_loaded = load.records;
    st.log_tails_cut = load.tails_cut;
    st.log_bytes_cut = load.bytes_cut;
    st.log_cuts = load.cuts;
  });
  // The records loaded become one snapshot, and the log starts empty: a cut tail is gone from the
  // files, and the directory holds what the map holds.
  if (!compact()) {
    throw KvstoreError("kvstore log: cannot write a snapshot in '" + options.log.dir + "': " + stats.log_error +
                       " ([kvstore] log_dir)");
  }
}

void Store::log_append(const LogRecord& record) {
  if (!log || !log->open()) return;
  try {
    log->append(record);
    count([this](ServerStats& s) { s.log_bytes = log->log_bytes(); });
  } catch (const KvstoreError& error) {
    log_failed(error.what());
  }
}

void Store::log_failed(const std::string& why) {
  count([&why](ServerStats& s) {
    ++s.log_write_errors;
    s.log_failing = true;
    s.log_error = why;
  });
}

void Store::restore(LogRecord&& record) {
  sequence = std::max(sequence, record.sequence);
  if (record.key == own_status_key) return;  // the server writes its status anew
  const auto existing = map.find(record.key);
  if (record.kind == LogRecord::Kind::kDelete) {
    if (existing != map.end()) drop(existing);
    return;
  }
  KvMsg msg;
  msg.key = record.key;
  msg.sequence = record.sequence;
  msg.uuid = std::move(record.uuid);
  msg.properties = decode_properties(record.properties);
  msg.body = std::move(record.body);
  std::optional<Clock::time_point> expires;
  if (record.deadline_ms > 0) {
    // What is left of its ttl; a deadline passed while the server was down expires at the first turn.
    const double left_s = std::clamp(static_cast<double>(record.deadline_ms - wall_ms()) / 1000.0, 0.0,
                                     options.max_ttl_s);
    expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left_s));
  }
  const bool stack = policy->reserved(msg.key);
  const MapUsage::Held held{stack ? kStackRoom : record.account, footprint(msg)};
  if (existing != map.end()) forget_expiry(existing);
  (stack ? stack_usage : usage).charge(held, existing != map.end() ? &existing->second.held : nullptr);
  if (expires) expiries.emplace(*expires, msg.key);
  if (const std::string group = policy->group_of(msg.key); !group.empty()) {
    const auto [born, added] = group_born.emplace(group, record.sequence);
    if (!added && record.sequence < born->second) {
      groups_by_age.erase({born->second, group});
      born->second = record.sequence;
    }
    groups_by_age.emplace(born->second, group);
    if (msg.key == policy->fold_key(group)) note_fold(group, record.sequence);
  }
  std::string key = msg.key;
  map[std::move(key)] = Entry{std::make_shared<const KvMsg>(std::move(msg)), expires, held, record.writer};
}

bool Store::compact() {
  try {
    const auto now_steady = Clock::now();
    const std::int64_t now_wall = wall_ms();
    log->compact(sequence, [&](const RecordLog::Sink& sink) {
      for (const auto& [key, entry] : map) {
        if (key == own_status_key) continue;
        LogRecord record;
        record.kind = LogRecord::Kind::kSet;
        record.sequence = entry.msg->sequence;
        record.key = key;
        record.uuid = entry.msg->uuid;
        record.properties = encode_properties(entry.msg->properties);
        record.body = entry.msg->body;
        record.writer = entry.writer;
        record.account = entry.held.address;
        if (entry.expires) {
          record.deadline_ms =
              std::max<std::int64_t>(1, now_wall + std::chrono::ceil<std::chrono::milliseconds>(
                                                       std::max(*entry.expires - now_steady, Clock::duration{}))
                                                       .count());
        }
        sink(record);
      }
    });
  } catch (const KvstoreError& error) {
    log_failed(error.what());
    return false;
  }
  count([this](ServerStats& s) {
    ++s.log_compactions;
    s.log_failing = false;
    s.log_bytes = log->log_bytes();
  });
  return true;
}

void Store::compact_if_due() {
  if (log && log->open() && log->compaction_due()) compact();
}

void Store::tend_log(Clock::time_point now, bool heartbeat) {
  if (!log) return;
  if (!log->open()) {
    if (heartbeat) compact();
    return;
  }
  try {
    log->sync(now);
  } catch (const KvstoreError& error) {
    log_failed(error.what());
    return;
  }
  compact_if_due();
}

}  // namespace sectorflow::kvstore::detail
