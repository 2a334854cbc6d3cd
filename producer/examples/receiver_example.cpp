// A receiver program that embeds sectorflow without Python: it links the installed
// sectorflow::producer (and sectorflow::simulator as its detector), fixes the routing of a scan
// once from its kvstore replica and streams its sector with T threads, or writes it to raw files
// when no NodeGroup is registered.
//
//   receiver_example --kvstore-host H --kvstore-port P --aggregator tcp://H:PORT --receiver R
//                    --threads T --scan N --scan-x X --scan-y Y --fallback-dir DIR
//                    [--frame ROWSxCOLS --sector ROWSxCOLS]   (default 576x576 and 144x576)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sectorflow/kvstore/client.hpp>
#include <sectorflow/producer/errors.hpp>
#include <sectorflow/producer/producer.hpp>
#include <sectorflow/producer/routing.hpp>
#include <sectorflow/producer/sector_source.hpp>
#include <sectorflow/producer/sibling_gate.hpp>
#include <sectorflow/protocol/bad_entries.hpp>
#include <sectorflow/simulator/simulator.hpp>

namespace {

// producer.max_lead_frames of configs/local.toml.
constexpr std::uint64_t kMaxLeadFrames = 32;

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

std::pair<std::uint32_t, std::uint32_t> shape(const std::string& text) {
  const auto x = text.find('x');
  if (x == std::string::npos) throw std::runtime_error("shape '" + text + "': expected ROWSxCOLS");
  return {static_cast<std::uint32_t>(std::stoul(text.substr(0, x))),
          static_cast<std::uint32_t>(std::stoul(text.substr(x + 1)))};
}

}  // namespace

int main(int argc, char** argv) {
  namespace sp = sectorflow::producer;
  try {
    const auto args = parse(argc, argv);
    sectorflow::protocol::Geometry geometry;
    if (args.count("--frame")) std::tie(geometry.frame_rows, geometry.frame_cols) = shape(args.at("--frame"));
    if (args.count("--sector")) std::tie(geometry.sector_rows, geometry.sector_cols) = shape(args.at("--sector"));

    sectorflow::kvstore::ClientOptions kv;
    kv.host = need(args, "--kvstore-host");
    kv.port = static_cast<std::uint16_t>(std::stoul(need(args, "--kvstore-port")));
    sectorflow::kvstore::Client client(kv);
    if (!client.wait_synced(std::chrono::seconds(10))) throw std::runtime_error("the kvstore did not answer");

    const auto threads = static_cast<std::uint32_t>(std::stoul(need(args, "--threads")));
    const auto receiver = static_cast<std::uint32_t>(std::stoul(need(args, "--receiver")));
    sp::ScanRequest request;
    request.scan_number = static_cast<std::uint32_t>(std::stoul(need(args, "--scan")));
    request.scan_x = static_cast<std::uint32_t>(std::stoul(need(args, "--scan-x")));
    request.scan_y = static_cast<std::uint32_t>(std::stoul(need(args, "--scan-y")));
    // Fixed once for all threads, so that they route the scan alike.
    sectorflow::protocol::BadEntries bad;  // registrations that do not decode are skipped, logged once
    request.routing = sp::routing_from_replica(client, bad);

    const sectorflow::simulator::Simulator simulator(sectorflow::simulator::SimulatorSettings{}, geometry);
    // Detector hardware paces a receiver's threads together; a simulated source does not, and a
    // thread far ahead of its siblings fills the NodeGroups' frame pools (sibling_gate.hpp).
    sp::SiblingGate gate(threads, std::max<std::uint64_t>(kMaxLeadFrames, threads));
    std::vector<sp::ScanResult> results(threads);
    std::vector<std::string> errors(threads);
    std::vector<std::thread> workers;
    for (std::uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          auto options = sp::ProducerOptions::for_thread(geometry, receiver, t, threads, need(args, "--aggregator"));
          options.fallback_dir = need(args, "--fallback-dir");
          sp::Producer producer(options, &client);
          sp::GeneratedSource source(
              std::uint64_t{request.scan_x} * request.scan_y, threads, t,
              [&](std::uint32_t frame, void* out, std::size_t bytes) {
                simulator.generate_sector(request.scan_number, frame, receiver, out, bytes);
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
