// What one NodeGroup needs to run, every value from the [nodegroup], [counting], [detector],
// [[receivers]] and [limits] configuration tables (sectorflow.consumer.nodegroup.nodegroup_service.
// settings_from): where it binds, how many aggregator threads feed it, how many threads count, how
// many frames it may hold while they are assembled, when an unfinished scan times out, how frames
// are counted. No field that comes from the configuration has a default: validate() refuses one
// left unset (0, empty or NaN), naming its key.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/consumer/counting/calibration.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/security/curve.hpp"
#include "sectorflow/consumer/nodegroup/frame_kernel.hpp"

namespace sectorflow::consumer::nodegroup {

/// How a scan's counting thresholds are chosen ([counting] table). NaN: not set.
struct ThresholdSettings {
  std::uint32_t sample_frames = 0;  ///< threshold_sample_frames: first complete frames of each scan sampled
  /// background_sigma: background = optimized mean + this x optimized sigma
  double background_sigma = std::numeric_limits<double>::quiet_NaN();
  /// xray_sigma: x-ray threshold = mean + this x std
  double xray_sigma = std::numeric_limits<double>::quiet_NaN();
  /// background_threshold: fixed ADU if > 0 (both fixed: no sample is taken)
  double background_threshold = std::numeric_limits<double>::quiet_NaN();
  /// xray_threshold: fixed ADU if > 0
  double xray_threshold = std::numeric_limits<double>::quiet_NaN();

  /// threshold_share_ms: with > 0, a full sample is handed to the job (NodeGroup::take_samples),
  /// which fits the scan's thresholds once from every NodeGroup's sample and gives them back
  /// (NodeGroup::adopt_thresholds); a NodeGroup given none this long after its sample was full
  /// decides from its own. 0: each NodeGroup decides from its own sample at once.
  std::uint32_t share_ms = 0;

  bool fixed() const { return background_threshold > 0.0 && xray_threshold > 0.0; }
};

struct NodeGroupSettings {
  std::string uid;                     ///< this NodeGroup's UID: its key in the info messages' counts
  std::string host;                    ///< [nodegroup] host: the address the PULL sockets bind (ports from the OS)
  protocol::Geometry geometry;         ///< [detector]: frame and sector shape; pixels must be uint16
  std::uint32_t receivers = 0;         ///< [[receivers]]: one sector each
  /// The aggregation tier's size ([aggregator] tier): a PULL socket per relay thread of the tier,
  /// port j fed by member j / receivers's thread for receiver j % receivers. 1 unless set.
  std::uint32_t aggregators = 1;
  /// [[receivers]] threads, one per receiver: its producer threads (frame f's sector comes from
  /// thread f % n, in frame order per thread; this tells a lost sector from a late one).
  std::vector<std::uint32_t> producer_threads;
  std::uint32_t counting_threads = 0;  ///< [nodegroup] counting_threads: assembling and counting threads
  int recv_hwm = 0;                    ///< [nodegroup] recv_hwm: high-water mark of the PULL sockets (messages)
  int rcvbuf_bytes = 0;                ///< [nodegroup] rcvbuf_bytes: ZMQ_RCVBUF of the PULL sockets; 0: kernel autotuning
  /// [nodegroup] pool_frames: frames held while assembling, split over the counting threads.
  std::uint32_t pool_frames = 0;
  /// [nodegroup] scan_timeout_s: no data this long before completion: finish with what arrived.
  double scan_timeout_s = 0.0;
  protocol::ScanLimits limits;         ///< [limits] max_scan_positions: the largest scan accepted
  std::uint32_t max_open_scans = 0;    ///< [limits] max_open_scans: scans live at once
  /// Electron-count the assembled frames. false: assemble only (no threshold sample, no counting;
  /// each frame is recorded with no events and thresholds_known stays false): what the transport
  /// benchmark measures, the data path without the arithmetic.
  bool count = true;
  ThresholdSettings thresholds;
  /// [analysis]: the virtual detectors the counted frames are imaged with (virtual_images.hpp);
  /// unset ([analysis] virtual_images = false): no virtual images.
  std::optional<VirtualDetectors> detectors;
  /// [analysis] analyses: the per-frame kernels the counted frames are imaged with, with detectors
  /// set (frame_kernel.hpp; the configuration's analyses name theirs, nodegroup_service.settings_from).
  std::vector<KernelChoice> kernels = builtin_kernels();
  /// [analysis] live: hand each counted frame to the live feed (NodeGroup::take_live), with
  /// detectors set. live_buffer_frames: frames the feed holds between two takes.
  bool live = false;
  std::uint32_t live_buffer_frames = 0;
  /// Frames counted out while the scan runs: a counting thread whose part of a scan holds this
  /// many events hands its counted frames to the NodeGroup (NodeGroup::take_counted), which keeps
  /// the scan's frames no one took yet; 0: every frame stays in the scan's result until it ends.
  std::uint64_t drain_events = 0;
  /// [security]: the NodeGroup's key pair and the aggregator's public key. The PULL sockets are
  /// CURVE clients although they bind: only the aggregator's key completes a handshake with them,
  /// and the aggregator checks theirs against its nodegroup allowlist. Off: plain TCP.
  security::CurveClient curve;
  /// [security] with a tier: each member's public key, member order; port j speaks to member
  /// j / receivers. Empty: curve.server_key on every port.
  std::vector<std::string> aggregator_keys;
  std::shared_ptr<const counting::Calibration> calibration;  ///< dark reference and gain; null: none

  /// Throws NodeGroupError naming the setting, the value and what is allowed.
  void validate() const;
  /// Frames each counting thread holds: pool_frames / counting_threads, at least 1.
  std::uint32_t slots_per_thread() const;
  /// Producer threads of receiver r.
  std::uint32_t threads_of(std::uint32_t r) const { return producer_threads[r]; }
  /// The data ports, one per relay thread of the tier: receivers x aggregators.
  std::uint32_t ports() const { return receivers * aggregators; }
};

}  // namespace sectorflow::consumer::nodegroup
