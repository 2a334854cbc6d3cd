// A beamline's key directory (docs/deployment.md, "Keys"): one folder per role, each holding the certificates
// of that role's parties, `<dir>/<role>/<name>.key` (public) and, on the host that is that party,
// `<name>.key_secret` (mode 0600):
//
//   keys/kvstore/server.key(_secret)         the kvstore server's pair; clients need its public key
//   keys/aggregator/aggregator.key(_secret)  the aggregator's; producers and NodeGroups need its public key
//   keys/aggregator/member-<i>.key(_secret)  with an aggregation tier ([aggregator] tier), member i's
//   keys/producer/receiver-0.key(_secret)    one per receiver server (or one for all)
//   keys/nodegroup/session.key(_secret)      the streaming sessions'
//   keys/operator/<person>.key(_secret)      who may acquire
//   keys/viewer/<person>.key(_secret)        who may only read
//
// The public certificates of a role's folder are that role's allowlist; a process of a role uses
// the one secret of its role's folder. Which roles a listener accepts is fixed by the design
// (protocol/SPEC.md, "Security"), not by the files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sectorflow/security/certificate.hpp"

namespace sectorflow::security {

/// The roles of a beamline, in the order of the key directory's documentation.
inline constexpr const char* kRoles[] = {"kvstore", "producer", "aggregator", "nodegroup", "operator", "viewer"};

/// Whether `role` is one of kRoles.
bool is_role(const std::string& role);

/// The certificate name of member `member` of an aggregation tier ([aggregator] tier):
/// "member-<i>", i.e. keys/aggregator/member-<i>.key(_secret). A single aggregator keeps the
/// folder's one pair, whatever its name.
std::string tier_member_key_name(std::uint32_t member);

class KeyDirectory {
 public:
  /// Throws SecurityError if `path` is not a directory.
  explicit KeyDirectory(std::string path);

  /// The key pair of this process for `role`: the one `<role>/*.key_secret`, or with `name` the
  /// pair `<role>/<name>.key_secret` (a member of the aggregation tier, when one host holds
  /// several). Throws SecurityError naming the folder when there is none, or more than one (keep
  /// this host's only).
  Certificate own(const std::string& role, const std::string& name = {}) const;
  /// The public key of the one party of `role` (the kvstore server, the aggregator): the one
  /// `<role>/*.key`, or with `name` the certificate `<role>/<name>.key` (a member of the
  /// aggregation tier). Throws SecurityError when there is none or (without name) more than one.
  std::string public_key(const std::string& role, const std::string& name = {}) const;
  /// Every public key of `roles`, each with its identity "<role>/<name>": a listener's allowlist.
  /// A key listed under two roles takes the first. Throws SecurityError for a certificate that
  /// does not read.
  std::map<std::string, std::string> allowlist(const std::vector<std::string>& roles) const;
  /// Whether `role` has a secret in this directory.
  bool has_own(const std::string& role) const;

  const std::string& path() const { return path_; }

 private:
  /// The files of `<role>/` ending with `suffix`, sorted.
  std::vector<std::string> files(const std::string& role, const std::string& suffix) const;

  std::string path_;
};

}  // namespace sectorflow::security
