#include "sectorflow/security/from_config.hpp"

#include "sectorflow/security/key_directory.hpp"

namespace sectorflow::security {

CurveClient curve_client(const configs::Beamline& beamline, const std::string& role, const std::string& server_role) {
  CurveClient curve;
  if (!beamline.boolean("security.enabled")) return curve;
  const KeyDirectory keys(beamline.text("security.key_dir"));
  const Certificate own = keys.own(role);
  curve.public_key = own.public_key;
  curve.secret_key = own.secret_key;
  curve.server_key = keys.public_key(server_role);
  return curve;
}

}  // namespace sectorflow::security
