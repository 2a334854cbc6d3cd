// A receiver program that embeds sectorflow without Python: it links the installed
// sectorflow::producer (and sectorflow::simulator as its detector), reads what it needs from the
// beamline file with sectorflow::configs (the geometry, its receiver's producer threads, [limits])
// and each component's mapping of its own keys (producer_options, kvstore::client_options,
// simulator_settings: the ones the daemons use; a key the file leaves out has the same default as
// in Python), fixes the routing of a scan once from its kvstore replica
// and streams its sector with one thread per producer thread, or writes it to raw files when no
// NodeGroup is registered.
//
//   receiver_example --config FILE --receiver R --scan N --scan-x X --scan-y Y
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sectorflow/configs/beamline.hpp>
#include <sectorflow/configs/layout.hpp>
#include <sectorflow/kvstore/client.hpp>
#include <sectorflow/kvstore/from_config.hpp>
#include <sectorflow/producer/errors.hpp>
#include <sectorflow/producer/from_config.hpp>
#include <sectorflow/producer/producer.hpp>
#include <sectorflow/producer/routing.hpp>
#include <sectorflow/producer/sector_source.hpp>
#include <sectorflow/producer/sibling_gate.hpp>
#include <sectorflow/protocol/bad_entries.hpp>
#include <sectorflow/protocol/limits.hpp>
#include <sectorflow/simulator/from_config.hpp>
#include <sectorflow/simulator/simulator.hpp>

namespace {

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  return args;
}

std::string need(const std::map<std::string, std::string>& args, const std::string& key) {
  const auto it = args.find(key);
  if (it == args.end()) throw std::runtime_error("missing " + key + " (see the comment at the top of the source)");
  return it->second;
}

std::uint32_t number(const std::map<std::string, std::string>& args, const std::string& key) {
  return static_cast<std::uint32_t>(std::stoul(need(args, key)));
}

}  // namespace

int main(int argc, char** argv) {
  namespace sp = sectorflow::producer;
  namespace cf = sectorflow::configs;
  try {
    const auto args = parse(argc, argv);
    const cf::Beamline beamline = cf::Beamline::load(need(args, "--config"));
    const std::uint32_t receiver = number(args, "--receiver");
    const std::uint32_t threads = cf::receiver_threads(beamline, receiver);

    sp::ScanRequest request;
    request.scan_number = number(args, "--scan");
    request.scan_x = number(args, "--scan-x");
    request.scan_y = number(args, "--scan-y");
    // The simulated detector's frame counter at position 0; a real receiver takes its own.
    request.first_frame = static_cast<std::uint32_t>(beamline.integer("simulator.first_frame"));
    // Everything the scan allocates is sized from its shape: bound it before anything is built.
    sectorflow::protocol::check_scan_shape(request.scan_x, request.scan_y, cf::scan_limits(beamline),
                                           "scan " + std::to_string(request.scan_number));

    sectorflow::kvstore::Client client(sectorflow::kvstore::client_options(beamline));
    if (!client.wait_synced(std::chrono::seconds(10))) {
      throw std::runtime_error("the kvstore at " + client.options().host + ":" + std::to_string(client.options().port) +
                               " did not answer ([kvstore] of " + beamline.source() + ")");
    }
    // Fixed once for all threads, so that they route the scan alike.
    sectorflow::protocol::BadEntries bad;  // registrations that do not decode are skipped, logged once
    request.routing = sp::routing_from_replica(client, bad);

    const sectorflow::simulator::Simulator simulator(sectorflow::simulator::simulator_settings(beamline),
                                                     cf::geometry(beamline));
    // Detector hardware paces a receiver's threads together; a simulated source does not, and a
    // thread far ahead of its siblings fills the NodeGroups' frame pools (sibling_gate.hpp).
    sp::SiblingGate gate(threads, sp::max_lead_frames(beamline));
    std::vector<sp::ScanResult> results(threads);
    std::vector<std::string> errors(threads);
    std::vector<std::thread> workers;
    for (std::uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          sp::Producer producer(sp::producer_options(beamline, receiver, t), &client);
          sp::GeneratedSource source(
              std::uint64_t{request.scan_x} * request.scan_y, threads, t,
              [&](std::uint32_t frame, void* out, std::size_t bytes) {
                simulator.generate_sector(request.scan_number, frame, receiver, out, bytes, request.scan_x);
              },
              [&](std::uint32_t frame) { return simulator.dropped(request.scan_number, frame, receiver); });
          results[t] = producer.run_scan(request, source, &gate);
        } catch (const std::exception& error) {
          gate.finish(t);  // run_scan finishes it itself; a producer that failed to start must too
          errors[t] = error.what();
        }
      });
    }
    for (auto& worker : workers) worker.join();
    std::uint64_t messages = 0, bytes = 0;
    for (std::uint32_t t = 0; t < threads; ++t) {
      if (!errors[t].empty()) throw std::runtime_error("thread " + std::to_string(t) + ": " + errors[t]);
      messages += results[t].messages;
      bytes += results[t].bytes;
    }
    std::printf("scan %u: %s, %llu messages, %llu bytes\n", request.scan_number, sp::to_string(results[0].decision.mode),
                static_cast<unsigned long long>(messages), static_cast<unsigned long long>(bytes));
    client.close();
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "receiver_example: error: %s\n", error.what());
    return 1;
  }
}
