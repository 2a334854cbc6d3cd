// The transport benchmark's producer side of path (c): sectorflow's own producer library
// (sectorflow::producer, the code a receiver program links) streaming one scan of one sector,
// fed the same constant payload as zmq_hop's sender, zero-copy, so that the path measured is the
// producer's send, the aggregator and the NodeGroup, not a detector or a simulator.
//
//   producer_feed --aggregator EP --route UID --receiver R --threads T --scan-x X --scan-y Y
//                 --frame ROWSxCOLS --sector ROWSxCOLS --itemsize B --hwm H --timeout-s S [--key-dir D]
// (--key-dir: CURVE with the key directory's producer pair and the aggregator's public key)
//
// T producer threads (thread t sends frames f with f % T == t, as the daemon's threads do), each
// with its own PUSH socket to EP, route scan 1 to the NodeGroup UID (no kvstore: the routing is
// given, as `sectorflow acquire` fixes it). A scan still running after S seconds is stopped and the
// program ends with an error. Prints one JSON line {"sent": messages, "seconds": s, "cpu_s": c} (c:
// CPU seconds of the process); errors are one line on stderr and exit code 2.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "sectorflow/producer/errors.hpp"
#include "sectorflow/producer/producer.hpp"
#include "sectorflow/producer/sector_source.hpp"
#include "sectorflow/security/key_directory.hpp"

namespace {

namespace sp = sectorflow::producer;
using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) throw std::runtime_error(std::string("option ") + argv[i] + " needs a value");
    args[argv[i]] = argv[i + 1];
  }
  return args;
}

std::string need(const std::map<std::string, std::string>& args, const std::string& key) {
  const auto it = args.find(key);
  if (it == args.end()) throw std::runtime_error("missing " + key + " (see the comment at the top of producer_feed.cpp)");
  return it->second;
}

std::uint32_t number(const std::map<std::string, std::string>& args, const std::string& key) {
  return static_cast<std::uint32_t>(std::stoul(need(args, key)));
}

std::pair<std::uint32_t, std::uint32_t> shape(const std::string& text) {
  const auto x = text.find('x');
  if (x == std::string::npos) throw std::runtime_error("shape '" + text + "': expected ROWSxCOLS");
  return {static_cast<std::uint32_t>(std::stoul(text.substr(0, x))),
          static_cast<std::uint32_t>(std::stoul(text.substr(x + 1)))};
}

// The payload outlives every message that refers to it: nothing to release.
void keep(void* /*data*/, void* /*hint*/) {}

// User + system CPU seconds of every thread of this process so far (ZeroMQ's I/O threads included).
double cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto args = parse(argc, argv);
    sectorflow::protocol::Geometry geometry;
    std::tie(geometry.frame_rows, geometry.frame_cols) = shape(need(args, "--frame"));
    std::tie(geometry.sector_rows, geometry.sector_cols) = shape(need(args, "--sector"));
    geometry.itemsize = number(args, "--itemsize");
    const std::uint32_t receiver = number(args, "--receiver");
    const std::uint32_t threads = number(args, "--threads");
    const auto timeout = std::chrono::seconds(number(args, "--timeout-s"));

    sp::ScanRequest request;
    request.scan_number = 1;
    request.scan_x = number(args, "--scan-x");
    request.scan_y = number(args, "--scan-y");
    request.routing = std::vector<std::string>{need(args, "--route")};
    const std::uint64_t n_frames = std::uint64_t{request.scan_x} * request.scan_y;
    std::vector<unsigned char> payload(geometry.sector_bytes());
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<unsigned char>(i);

    std::vector<std::unique_ptr<sp::Producer>> producers;
    for (std::uint32_t t = 0; t < threads; ++t) {
      sp::ProducerOptions options;
      options.geometry = geometry;
      options.receiver = receiver;
      options.thread_id = t;
      options.threads = threads;
      options.wire = sp::Wire::kSectorflow;  // the transport paths carry SFSP
      options.aggregator_endpoints = {need(args, "--aggregator")};
      options.send_hwm = static_cast<int>(number(args, "--hwm"));
      options.status_ttl_s = 0.0;  // no kvstore, no status; the routing is given and no scan falls back
      options.scan_record_ttl_s = 1.0;  // no kvstore: no scan record either
      // A send blocked for the whole run's bound fails the run (no fallback_dir to spill to).
      options.send_timeout_ms = static_cast<int>(std::chrono::milliseconds(timeout).count());
      options.linger_ms = static_cast<int>(std::chrono::milliseconds(timeout).count());
      if (args.count("--key-dir") != 0) {
        const sectorflow::security::KeyDirectory keys(args.at("--key-dir"));
        const sectorflow::security::Certificate own = keys.own("producer");
        options.curve = {own.public_key, own.secret_key, keys.public_key("aggregator")};
      }
      producers.push_back(std::make_unique<sp::Producer>(options, nullptr));
    }

    std::vector<std::string> errors(threads);
    std::atomic<std::uint32_t> running{threads};
    std::mutex mutex;
    std::condition_variable done;
    const auto start = Clock::now();
    std::vector<std::thread> workers;
    for (std::uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          const std::vector<std::uint32_t> frames = sp::thread_share(n_frames, threads, t);
          producers[t]->begin_scan(request, frames);
          for (const std::uint32_t frame : frames) {
            producers[t]->send(frame, receiver, payload.data(), payload.size(), keep, nullptr);
          }
          producers[t]->end_scan();
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
        std::lock_guard<std::mutex> lock(mutex);
        --running;
        done.notify_all();
      });
    }
    {
      // The watchdog: a scan that cannot finish in time is stopped (its send throws ProducerStopped).
      std::unique_lock<std::mutex> lock(mutex);
      if (!done.wait_for(lock, timeout, [&] { return running.load() == 0; })) {
        for (auto& producer : producers) producer->stop();
      }
    }
    for (std::thread& worker : workers) worker.join();
    producers.clear();  // each waits (linger) until its queue has left
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (std::uint32_t t = 0; t < threads; ++t) {
      if (!errors[t].empty()) throw std::runtime_error("thread " + std::to_string(t) + ": " + errors[t]);
    }
    std::printf("{\"sent\": %llu, \"seconds\": %.6f, \"cpu_s\": %.6f}\n", static_cast<unsigned long long>(n_frames),
                seconds, cpu_s());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "producer_feed: error: %s\n", e.what());
    return 2;
  }
}
