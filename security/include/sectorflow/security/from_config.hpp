// The [security] table of a beamline file as the CURVE settings of a C++ client (a receiver
// program's kvstore client and data sockets). The Python services take theirs from
// sectorflow.security.options, which also knows the server side, tier members' pairs and fallback roles.
#pragma once

#include <string>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/security/curve.hpp"

namespace sectorflow::security {

/// This host's key pair of `role` from [security] key_dir and the public key of `server_role`; off
/// when [security] enabled is false. Throws SecurityError for a missing key directory or key.
CurveClient curve_client(const configs::Beamline& beamline, const std::string& role, const std::string& server_role);

}  // namespace sectorflow::security
