// The [kvstore] table of a beamline file as the server's and a client's options: the one mapping
// of those keys, which the Python services call too (sectorflow.kvstore.options adds what a process
// owns: its callbacks, the pair it runs as, its CURVE keys).
#pragma once

#include <string>

#include "sectorflow/configs/beamline.hpp"
#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/server.hpp"

namespace sectorflow::kvstore {

/// How a client reaches the server and what it may send, from [kvstore] alone; `subtree` as
/// ClientOptions. No CURVE keys: the Python services add the ones the process owns (a tier
/// member's pair, a role's fallback: sectorflow.kvstore.options).
ClientOptions unkeyed_client_options(const configs::Beamline& beamline, std::string subtree = "");
/// unkeyed_client_options with, under [security] enabled, the key of `role` from [security] key_dir
/// (a receiver program is a producer). Throws security::SecurityError for a missing key.
ClientOptions client_options(const configs::Beamline& beamline, std::string subtree = "",
                             const std::string& role = "producer");
/// Where the server binds, its heartbeat, its bounds, its durable log and the receivers' producer threads.
ServerOptions server_options(const configs::Beamline& beamline);

}  // namespace sectorflow::kvstore
