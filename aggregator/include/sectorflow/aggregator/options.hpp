// What an aggregator needs to know: where its threads listen, how many producer threads feed
// each of them, and how to reach the kvstore that says where the NodeGroups are. Every value comes
// from the configuration: aggregator_options (from_config.hpp) maps the beamline's keys, the daemon
// (sectorflow.aggregator.options) adds its kvstore client and CURVE servers. The keys' ranges are
// the schema's (configs/schema.py), checked when the file is loaded; the Aggregator checks only
// what no one key says (the tier, the ports, one wire and one sector per receiver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/security/curve.hpp"

namespace sectorflow::aggregator {

struct AggregatorOptions {
  std::string bind_host;                       ///< [aggregator] bind_host: interface the PULL sockets bind
  std::uint16_t base_port = 0;                 ///< [aggregator] base_port: thread r binds base_port + r
  /// This aggregator's index in the tier ([aggregator] tier; `sectorflow aggregator --member`):
  /// its thread r binds base_port + member * receivers + r and is relay thread member * receivers + r.
  std::uint32_t member = 0;
  /// The tier's size, len([aggregator] tier); a tier of one (the aggregator before tiers) unless set.
  std::uint32_t members = 1;
  std::vector<std::uint32_t> producer_threads; ///< [[receivers]] threads, T_r of each receiver r: one relay thread each
  int hwm = 0;                                 ///< [aggregator] hwm: high-water mark of every socket (messages)
  /// [aggregator] sndbuf_bytes: kernel send buffer (ZMQ_SNDBUF) of each socket to a NodeGroup, the
  /// WAN hop; 0 leaves the kernel's autotuning (net.ipv4.tcp_wmem) in charge.
  int sndbuf_bytes = 0;
  /// How long a NodeGroup of a routing list may be missing from the kvstore, or a new downstream
  /// connection may take to come up, before its messages count as lost: as long as a replica may
  /// be silent, [kvstore] silence_heartbeats x heartbeat_ms.
  std::uint32_t discovery_wait_ms = 0;
  /// [limits] max_open_scans: scans of one thread kept open at once; beyond it the oldest
  /// unfinished one is closed.
  std::uint32_t max_open_scans = 0;
  /// [aggregator] send_timeout_ms: how long a send to a NodeGroup may stay blocked (it is connected
  /// but does not read) before the NodeGroup is declared dead for that scan: its messages of the
  /// scan are then dropped and counted lost without waiting, and the relay record names it.
  std::uint32_t send_timeout_ms = 0;
  /// [kvstore] scan_record_ttl_s: time-to-live of the relay records (scans/<n>/aggregator/t<r>).
  double scan_record_ttl_s = 0.0;
  /// [[receivers]] wire, per receiver: "sectorflow" or "native" (the 4D Camera receivers' header).
  std::vector<std::string> wire;
  /// [aggregator] native_scan_idle_s: a native scan with no message this long is over at its thread.
  double native_scan_idle_s = 0.0;
  /// [aggregator] native_scans_requested: a native scan must have a request record (an acquire's)
  /// before its data opens a run; data of a scan with none is a stray, refused (no_info).
  bool native_scans_requested = true;
  kvstore::ClientOptions kvstore;              ///< the replicas of nodegroups/ and scans/ ([kvstore]; subtree is forced)
  protocol::Geometry geometry;                 ///< [detector]: what a data message must fit; one sector per receiver
  /// [limits] max_scan_positions: probe positions of the largest scan accepted.
  std::uint64_t max_scan_positions = 0;
  /// [security]: the PULL sockets as CURVE servers, allowing the producer keys (domain "producers").
  security::CurveServer producers_curve;
  /// [security]: the sockets to the NodeGroups as CURVE servers, allowing the nodegroup keys (domain
  /// "nodegroups"): the aggregator authenticates every NodeGroup it sends to.
  security::CurveServer nodegroups_curve;
};

}  // namespace sectorflow::aggregator
