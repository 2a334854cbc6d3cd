// The transport benchmark's raw ZeroMQ programs (bench/transport.py drives them):
//
//   zmq_hop send  --connect EP --scan-x X --scan-y Y --bytes B --hwm H --timeout-s T [--route UID] [--key-dir D]
//   zmq_hop sink  --bind EP --messages N --hwm H --timeout-s T [--key-dir D]
//   zmq_hop proxy --bind EP --connect EP --hwm H [--key-dir D]
//   zmq_hop check --messages N
//
// send: one PUSH socket; an info message (routing [UID], counts {UID: X*Y}, as a producer thread
// sends it, so that the aggregator can relay the stream) when --route is given, then X*Y data
// messages of the real wire format (protocol/data_message.hpp): a header encoded before the clock
// starts and the same B-byte payload every time, sent zero-copy, as the producer sends its pooled
// buffers. A send blocked for T seconds ends the program with an error. Prints {"sent", "seconds",
// "cpu_s"} once the queue has left.
// sink: one PULL socket; prints {"endpoint": ...} once bound, then receives until N two-part
// messages came or T seconds passed, and prints {"messages", "bytes", "seconds", "cpu_s"}: payload
// bytes, from the first data message to the last, and the CPU seconds the process used.
// proxy: libzmq's own zmq_proxy() between a PULL (bound) and a PUSH (connected); prints
// {"endpoint": ...}; SIGTERM or SIGINT ends it cleanly (the context is shut down, zmq_proxy returns).
// check: what the aggregator does per message beyond a plain relay's receive and send: decodes and
// checks a header as every receiving thread does (protocol::decode_data: geometry, scan limits,
// sector, payload size) and picks a NodeGroup, N times; prints {"ns_per_message"}.
//
// --key-dir: CurveZMQ from a key directory (security/key_directory.hpp): the sender is a CURVE
// client with the producer pair and the aggregator's public key, the sink a CURVE server with the
// aggregator pair and a ZAP handler admitting producer keys, as the aggregator's PULL sockets are;
// the proxy is both, a CURVE server on its PULL and a client on its PUSH (so that it decrypts and
// encrypts every message, as the aggregator does with CURVE on both of its hops).
//
// Every line printed is one JSON object; errors are one line on stderr and exit code 2.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/security/curve.hpp"
#include "sectorflow/security/key_directory.hpp"
#include "sectorflow/security/zap_handler.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Args = std::map<std::string, std::string>;

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) throw std::runtime_error(std::string("option ") + argv[i] + " needs a value");
    args[argv[i]] = argv[i + 1];
  }
  return args;
}

std::string need(const Args& args, const std::string& key) {
  const auto it = args.find(key);
  if (it == args.end()) throw std::runtime_error("missing " + key + " (see the comment at the top of zmq_hop.cpp)");
  return it->second;
}

std::uint64_t number(const Args& args, const std::string& key) { return std::stoull(need(args, key)); }

int as_int(std::uint64_t value) { return static_cast<int>(value); }

// User + system CPU seconds of every thread of this process so far (ZeroMQ's I/O thread included).
double cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The payload is one static buffer that outlives every message referring to it: nothing to free.
void keep(void* /*data*/, void* /*hint*/) {}

// The CURVE settings of --key-dir, off without it.
sectorflow::security::CurveClient curve_client(const Args& args) {
  sectorflow::security::CurveClient curve;
  if (args.count("--key-dir") == 0) return curve;
  const sectorflow::security::KeyDirectory keys(args.at("--key-dir"));
  const sectorflow::security::Certificate own = keys.own("producer");
  curve.public_key = own.public_key;
  curve.secret_key = own.secret_key;
  curve.server_key = keys.public_key("aggregator");
  return curve;
}

sectorflow::security::CurveServer curve_server(const Args& args) {
  sectorflow::security::CurveServer curve;
  if (args.count("--key-dir") == 0) return curve;
  const sectorflow::security::KeyDirectory keys(args.at("--key-dir"));
  const sectorflow::security::Certificate own = keys.own("aggregator");
  curve.public_key = own.public_key;
  curve.secret_key = own.secret_key;
  curve.domain = "producers";
  curve.peers = keys.allowlist({"producer"});
  return curve;
}

void print_endpoint(zmq::socket_t& socket) {
  std::printf("{\"endpoint\": \"%s\"}\n", socket.get(zmq::sockopt::last_endpoint).c_str());
  std::fflush(stdout);
}

int send(const Args& args) {
  const auto scan_x = static_cast<std::uint32_t>(number(args, "--scan-x"));
  const auto scan_y = static_cast<std::uint32_t>(number(args, "--scan-y"));
  const std::size_t bytes = number(args, "--bytes");
  const int timeout_ms = as_int(number(args, "--timeout-s") * 1000);
  const std::uint32_t messages = scan_x * scan_y;

  // Encoded before the clock starts: the stream, not the codec, is measured.
  std::vector<std::string> headers;
  headers.reserve(messages);
  for (std::uint32_t f = 0; f < messages; ++f) {
    sectorflow::protocol::DataHeader header;
    header.scan_number = 1;
    header.frame_number = f;
    header.scan_x = scan_x;
    header.scan_y = scan_y;
    header.position_x = f % scan_x;
    header.position_y = f / scan_x;
    headers.push_back(sectorflow::protocol::encode_header(header));
  }
  static std::vector<unsigned char> payload;
  payload.resize(bytes);
  for (std::size_t i = 0; i < bytes; ++i) payload[i] = static_cast<unsigned char>(i);

  zmq::context_t context;
  zmq::socket_t push(context, zmq::socket_type::push);
  push.set(zmq::sockopt::sndhwm, as_int(number(args, "--hwm")));
  push.set(zmq::sockopt::sndtimeo, timeout_ms);
  push.set(zmq::sockopt::linger, timeout_ms);
  sectorflow::security::apply(push, curve_client(args));
  push.connect(need(args, "--connect"));

  const auto blocked = [&](std::uint32_t frame) {
    return std::runtime_error("send blocked for " + need(args, "--timeout-s") + " s at message " +
                              std::to_string(frame) + ": is the receiving side alive?");
  };
  if (args.count("--route")) {
    sectorflow::protocol::InfoMessage info;
    info.scan_number = 1;
    info.scan_x = scan_x;
    info.scan_y = scan_y;
    info.routing = {args.at("--route")};
    info.counts = {{args.at("--route"), messages}};
    if (!push.send(zmq::buffer(sectorflow::protocol::encode_info(info)))) throw blocked(0);
  }
  const auto start = Clock::now();
  for (std::uint32_t f = 0; f < messages; ++f) {
    zmq::message_t body(payload.data(), payload.size(), keep, nullptr);
    if (!push.send(zmq::buffer(headers[f]), zmq::send_flags::sndmore) || !push.send(body, zmq::send_flags::none)) throw blocked(f);
  }
  push.close();  // waits (linger) until the queue has left: the CPU it takes is part of sending
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"sent\": %u, \"seconds\": %.6f, \"cpu_s\": %.6f}\n", messages, seconds, cpu_s());
  return 0;
}

int sink(const Args& args) {
  const std::uint64_t wanted = number(args, "--messages");
  const auto deadline = Clock::now() + std::chrono::seconds(number(args, "--timeout-s"));
  zmq::context_t context;
  const sectorflow::security::CurveServer curve = curve_server(args);
  std::optional<sectorflow::security::ZapHandler> zap;
  if (curve.enabled()) zap.emplace(context, std::vector<sectorflow::security::CurveServer>{curve});
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::rcvhwm, as_int(number(args, "--hwm")));
  pull.set(zmq::sockopt::linger, 0);
  sectorflow::security::apply(pull, curve);
  pull.bind(need(args, "--bind"));
  print_endpoint(pull);

  std::uint64_t received = 0;
  std::uint64_t bytes = 0;
  Clock::time_point first;
  Clock::time_point last;
  zmq::message_t head;
  zmq::message_t body;
  while (received < wanted && Clock::now() < deadline) {
    zmq::pollitem_t item{pull.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    // Drain what is queued before polling again, as a relay's loop would.
    while (received < wanted && pull.recv(head, zmq::recv_flags::dontwait)) {
      if (!head.more()) continue;  // the info message
      (void)pull.recv(body);       // the rest of a multipart message is already here
      last = Clock::now();
      if (received == 0) first = last;
      ++received;
      bytes += body.size();
    }
  }
  const double seconds = received ? std::chrono::duration<double>(last - first).count() : 0.0;
  std::printf("{\"messages\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"cpu_s\": %.6f}\n",
              static_cast<unsigned long long>(received), static_cast<unsigned long long>(bytes), seconds, cpu_s());
  return 0;
}

int proxy(const Args& args) {
  // SIGTERM and SIGINT are taken by one thread (sigwait): blocked here, before the context starts
  // its I/O threads, so that they inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  zmq::context_t context;
  const sectorflow::security::CurveServer curve = curve_server(args);
  std::optional<sectorflow::security::ZapHandler> zap;
  if (curve.enabled()) zap.emplace(context, std::vector<sectorflow::security::CurveServer>{curve});
  zmq::socket_t front(context, zmq::socket_type::pull);
  zmq::socket_t back(context, zmq::socket_type::push);
  const int hwm = as_int(number(args, "--hwm"));
  for (zmq::socket_t* socket : {&front, &back}) {
    socket->set(zmq::sockopt::rcvhwm, hwm);
    socket->set(zmq::sockopt::sndhwm, hwm);
    socket->set(zmq::sockopt::linger, 0);
  }
  sectorflow::security::apply(front, curve);
  sectorflow::security::apply(back, curve_client(args));
  back.connect(need(args, "--connect"));
  front.bind(need(args, "--bind"));
  print_endpoint(front);

  std::thread stopper([&context, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    context.shutdown();  // zmq_proxy returns with ETERM
  });
  for (;;) {
    try {
      zmq::proxy(front, back);
    } catch (const zmq::error_t& e) {
      // zmq_proxy gives up with EAGAIN when a socket it polled as readable has no message at the
      // first receive of a burst (a known libzmq behaviour; seen with CURVE, whose handshake wakes the
      // poller). Nothing of a message was taken then, so proxying simply goes on.
      if (e.num() == EAGAIN) continue;
      if (e.num() != ETERM) {
        pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the stopper, which then ends
        stopper.join();
        throw;
      }
    }
    break;
  }
  stopper.join();
  return 0;
}

int check(const Args& args) {
  const std::uint64_t messages = number(args, "--messages");
  if (messages == 0) throw std::runtime_error("--messages must be at least 1");
  constexpr std::uint32_t kScanSide = 1u << 11;
  // The 4D Camera's geometry (configs/4dcamera.toml): 4 sectors of 144 x 576 uint16.
  const sectorflow::protocol::Geometry geometry{576, 576, 144, 576, 2};
  const sectorflow::protocol::DataExpectations expect{geometry, {kScanSide * kScanSide}, 0};
  std::vector<std::string> headers;
  for (std::uint32_t i = 0; i < 1024; ++i) {
    sectorflow::protocol::DataHeader header;
    header.scan_number = 1;
    header.frame_number = (i * 7919) % (kScanSide * kScanSide);  // wide frame numbers: msgpack's longer forms too
    header.scan_x = kScanSide;
    header.scan_y = kScanSide;
    header.position_x = header.frame_number % kScanSide;
    header.position_y = header.frame_number / kScanSide;
    headers.push_back(sectorflow::protocol::encode_header(header));
  }
  constexpr std::uint32_t kGroups = 3;
  std::vector<std::uint64_t> routed(kGroups, 0);  // read after the loop, so that the loop is not optimised away
  const std::size_t payload_bytes = expect.geometry.sector_bytes();
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < messages; ++i) {
    const std::string& header = headers[i % headers.size()];
    const auto decoded = sectorflow::protocol::decode_data(header.data(), header.size(), payload_bytes, expect);
    ++routed[decoded.frame_number % kGroups];
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::uint64_t total = 0;
  for (const std::uint64_t count : routed) total += count;
  if (total != messages) throw std::runtime_error("check: routed " + std::to_string(total) + " of " +
                                                  std::to_string(messages));
  std::printf("{\"ns_per_message\": %.3f}\n", seconds * 1e9 / static_cast<double>(messages));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    const Args args = parse(argc, argv);
    if (mode == "send") return send(args);
    if (mode == "sink") return sink(args);
    if (mode == "proxy") return proxy(args);
    if (mode == "check") return check(args);
    throw std::runtime_error("mode '" + mode + "': expected send, sink, proxy or check");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zmq_hop: error: %s\n", e.what());
    return 2;
  }
}
