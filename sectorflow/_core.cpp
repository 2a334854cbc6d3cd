// sectorflow._core: the one compiled extension. Each component's Python package re-exports its
// own submodule (sectorflow._core.protocol, ...), so the C++ types are registered exactly once.
#include "bindings.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "sectorflow's C++ core; import the component packages instead of this module.";
  namespace b = sectorflow::bindings;
  // protocol first: the other submodules take its types in their signatures.
  auto protocol = m.def_submodule("protocol", "Wire contracts: data, info and raw-file records.");
  b::bind_protocol(protocol);
  // security before the components whose option structs carry its CURVE settings.
  auto security = m.def_submodule("security", "CurveZMQ keys, the key directory, CURVE settings.");
  b::bind_security(security);
  // configs before the components whose mappings take its Beamline.
  auto configs = m.def_submodule("configs", "A beamline file read over the compiled-in defaults table.");
  b::bind_configs(configs);
  auto simulator = m.def_submodule("simulator", "Detector simulator.");
  b::bind_simulator(simulator);
  auto kvstore = m.def_submodule("kvstore", "Clone-pattern key-value store client.");
  b::bind_kvstore(kvstore);
  auto producer = m.def_submodule("producer", "Receiver-side sector streaming.");
  b::bind_producer(producer);
  auto aggregator = m.def_submodule("aggregator", "Routing of sectors to NodeGroups.");
  b::bind_aggregator(aggregator);
  auto counting = m.def_submodule("counting", "Electron counting, event for event as stempy.");
  b::bind_counting(counting);
  auto nodegroup = m.def_submodule("nodegroup", "The NodeGroup data path: receive, assemble, count.");
  b::bind_nodegroup(nodegroup);
}
