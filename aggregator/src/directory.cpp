#include "directory.hpp"

#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/protocol/records.hpp"

namespace sectorflow::aggregator::detail {
namespace {

kvstore::ClientOptions nodegroups_only(kvstore::ClientOptions options) {
  options.subtree = std::string(protocol::kNodegroupsPrefix);
  return options;
}

}  // namespace

Directory::Directory(kvstore::ClientOptions options) : client_(nodegroups_only(std::move(options))) {
  client_.on_change(std::string(protocol::kNodegroupsPrefix),
                    [this](const std::string&, const std::optional<std::string>&) {
                      {
                        const std::lock_guard<std::mutex> lock(mutex_);
                        generation_.fetch_add(1, std::memory_order_acq_rel);
                      }
                      changed_.notify_all();
                    });
}

Directory::~Directory() { close(); }

void Directory::close() { client_.close(); }

std::optional<std::string> Directory::endpoint(const std::string& uid, std::size_t thread) const {
  try {
    const std::optional<std::string> value = client_.get(protocol::nodegroup_key(uid));
    if (!value) return std::nullopt;
    return protocol::NodeGroupRecord::decode(*value).endpoint(thread);
  } catch (const kvstore::KvstoreError&) {
    // A registration this thread cannot use counts as absent: its messages are lost and counted.
    return std::nullopt;
  }
}

std::vector<std::string> Directory::registered(std::size_t thread) const {
  const protocol::NodeGroupList list = protocol::nodegroups_from(client_.subtree(std::string(protocol::kNodegroupsPrefix)));
  std::vector<std::string> uids;
  for (const protocol::NodeGroupRecord& record : list.records) {
    if (thread < record.ports.size()) uids.push_back(record.uid);  // records come sorted by uid
  }
  return uids;
}

void Directory::audit() const {
  const protocol::NodeGroupList list = protocol::nodegroups_from(client_.subtree(std::string(protocol::kNodegroupsPrefix)));
  for (const auto& [key, why] : bad_.note(protocol::kNodegroupsPrefix, list.rejected)) {
    if (client_.options().log) client_.options().log("skipped the registration " + key + ": " + why);
  }
}

void Directory::wait_change(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return generation_.load(std::memory_order_acquire) != seen; });
}

}  // namespace sectorflow::aggregator::detail
