// What one NodeGroup needs to run (filled from the [nodegroup], [counting] and [detector]
// configuration tables by sectorflow.nodegroup.nodegroup_service): where it binds, how many
// aggregator threads feed it, how many threads count, how many frames it may hold while they are
// assembled, when an unfinished scan times out, whether and how frames are counted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sectorflow/counting/calibration.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::nodegroup {

/// How a scan's counting thresholds are chosen ([counting] table).
struct ThresholdSettings {
  std::uint32_t sample_frames = 100;   ///< first complete frames of each scan sampled
  double background_sigma = 4.5;       ///< background = optimized mean + this x optimized sigma
  double xray_sigma = 175.0;           ///< x-ray threshold = mean + this x std
  double background_threshold = 0.0;   ///< fixed ADU if > 0 (both fixed: no sample is taken)
  double xray_threshold = 0.0;         ///< fixed ADU if > 0

  bool fixed() const { return background_threshold > 0.0 && xray_threshold > 0.0; }
};

struct NodeGroupSettings {
  std::string uid;                     ///< this NodeGroup's UID: its key in the info messages' counts
  std::string host = "127.0.0.1";      ///< address the PULL sockets bind (ports chosen by the OS)
  protocol::Geometry geometry;         ///< frame and sector shape; pixels must be uint16
  std::uint32_t receivers = 1;         ///< aggregator threads, one PULL socket each
  /// Per receiver: its producer threads (frame f's sector comes from thread f % n, in frame order
  /// per thread; this tells a lost sector from a late one). Empty: 1 for every receiver.
  std::vector<std::uint32_t> producer_threads;
  std::uint32_t counting_threads = 1;  ///< assembling and counting threads
  int recv_hwm = 1000;                 ///< high-water mark of the PULL sockets (messages)
  std::uint32_t pool_frames = 256;     ///< frames held while assembling, split over counting threads
  double scan_timeout_s = 60.0;        ///< no data this long before completion: finish with what arrived
  protocol::ScanLimits limits;         ///< largest scan accepted ([limits] max_scan_positions); must be set
  std::uint32_t max_open_scans = 0;    ///< scans live at once ([limits] max_open_scans); must be set
  /// Electron-count the assembled frames. false: assemble only (no threshold sample, no counting;
  /// each frame is recorded with no events and thresholds_known stays false): what the transport
  /// benchmark measures, the data path without the arithmetic.
  bool count = true;
  ThresholdSettings thresholds;
  std::shared_ptr<const counting::Calibration> calibration;  ///< dark reference and gain; null: none

  /// Throws NodeGroupError naming the setting, the value and what is allowed.
  void validate() const;
  /// Frames each counting thread holds: pool_frames / counting_threads, at least 1.
  std::uint32_t slots_per_thread() const;
  /// Producer threads of receiver r (1 when producer_threads is empty).
  std::uint32_t threads_of(std::uint32_t r) const { return producer_threads.empty() ? 1 : producer_threads[r]; }
};

}  // namespace sectorflow::nodegroup
