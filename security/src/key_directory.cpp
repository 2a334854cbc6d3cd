#include "sectorflow/security/key_directory.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "sectorflow/security/errors.hpp"

namespace sectorflow::security {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPublicSuffix = ".key";
constexpr const char* kSecretSuffix = ".key_secret";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string name_of(const std::string& file, const std::string& suffix) {
  const std::string base = fs::path(file).filename().string();
  return base.substr(0, base.size() - suffix.size());
}

void check_role(const std::string& role) {
  if (!is_role(role)) {
    std::string known;
    for (const char* r : kRoles) known += (known.empty() ? "" : ", ") + std::string(r);
    throw SecurityError("no role '" + role + "'; the roles are " + known);
  }
}

}  // namespace

bool is_role(const std::string& role) {
  return std::any_of(std::begin(kRoles), std::end(kRoles), [&role](const char* r) { return role == r; });
}

KeyDirectory::KeyDirectory(std::string path) : path_(std::move(path)) {
  std::error_code error;
  if (!fs::is_directory(path_, error)) {
    throw SecurityError(path_ + ": no such key directory ([security] key_dir); make one with "
                        "'sectorflow keys generate ROLE NAME'");
  }
}

std::vector<std::string> KeyDirectory::files(const std::string& role, const std::string& suffix) const {
  check_role(role);
  std::vector<std::string> found;
  std::error_code error;
  const fs::path folder = fs::path(path_) / role;
  if (!fs::is_directory(folder, error)) return found;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string file = entry.path().string();
    if (entry.is_regular_file(error) && ends_with(file, suffix)) found.push_back(file);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string tier_member_key_name(std::uint32_t member) { return "member-" + std::to_string(member); }

Certificate KeyDirectory::own(const std::string& role, const std::string& name) const {
  const std::string folder = (fs::path(path_) / role).string();
  if (!name.empty()) {
    const std::string file = (fs::path(folder) / (name + kSecretSuffix)).string();
    if (!fs::is_regular_file(file)) {
      throw SecurityError(file + ": no secret key of " + role + " " + name + "; make one with 'sectorflow keys generate " +
                          role + " " + name + "' on this host");
    }
    Certificate certificate = read_certificate(file);
    if (certificate.secret_key.empty()) throw SecurityError(file + ": no secret-key line");
    return certificate;
  }
  const std::vector<std::string> secrets = files(role, kSecretSuffix);
  if (secrets.empty()) {
    throw SecurityError(folder + ": no secret key of role " + role + " (*" + kSecretSuffix +
                        "); make one with 'sectorflow keys generate " + role + " NAME' on this host");
  }
  if (secrets.size() > 1) {
    throw SecurityError(folder + ": " + std::to_string(secrets.size()) + " secret keys of role " + role +
                        "; keep only this host's (" + name_of(secrets[0], kSecretSuffix) + ", " +
                        name_of(secrets[1], kSecretSuffix) + ", ...)");
  }
  Certificate certificate = read_certificate(secrets[0]);
  if (certificate.secret_key.empty()) throw SecurityError(secrets[0] + ": no secret-key line");
  return certificate;
}

bool KeyDirectory::has_own(const std::string& role) const { return !files(role, kSecretSuffix).empty(); }

std::string KeyDirectory::public_key(const std::string& role, const std::string& name) const {
  const std::string folder = (fs::path(path_) / role).string();
  if (!name.empty()) {
    const std::string file = (fs::path(folder) / (name + kPublicSuffix)).string();
    if (!fs::is_regular_file(file)) {
      throw SecurityError(file + ": no public certificate of " + role + " " + name +
                          "; copy it from the host that generated it");
    }
    return read_certificate(file).public_key;
  }
  const std::vector<std::string> publics = files(role, kPublicSuffix);
  if (publics.empty()) {
    throw SecurityError(folder + ": no public certificate of the " + role + " (*" + kPublicSuffix +
                        "); copy it from the host that generated it");
  }
  if (publics.size() > 1) {
    throw SecurityError(folder + ": " + std::to_string(publics.size()) + " public certificates of the " + role +
                        "; a beamline has one, keep only it");
  }
  return read_certificate(publics[0]).public_key;
}

std::map<std::string, std::string> KeyDirectory::allowlist(const std::vector<std::string>& roles) const {
  std::map<std::string, std::string> peers;
  for (const std::string& role : roles) {
    for (const std::string& file : files(role, kPublicSuffix)) {
      peers.emplace(read_certificate(file).public_key, role + "/" + name_of(file, kPublicSuffix));
    }
  }
  return peers;
}

}  // namespace sectorflow::security
