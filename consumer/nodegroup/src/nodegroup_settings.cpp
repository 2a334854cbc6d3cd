#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"
#include "sectorflow/protocol/limits.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::consumer::nodegroup {

void NodeGroupSettings::validate() const {
  const std::string who = "NodeGroup " + (uid.empty() ? std::string("<no uid>") : uid) + ": ";
  if (uid.empty() || uid.find('/') != std::string::npos) {
    throw NodeGroupError(who + "uid '" + uid + "' must be non-empty without '/'");
  }
  if (host.empty()) throw NodeGroupError(who + "[nodegroup] host is empty; give the node's address");
  try {
    geometry.validate();
  } catch (const protocol::ProtocolError& e) {
    throw NodeGroupError(who + e.what());
  }
  if (geometry.itemsize != 2) {
    throw NodeGroupError(who + "[detector] dtype has " + std::to_string(geometry.itemsize) +
                         " bytes per pixel; counting takes uint16 frames");
  }
  if (receivers == 0) throw NodeGroupError(who + "needs at least one aggregator thread ([[receivers]])");
  if (aggregators == 0 || aggregators > protocol::kMaxTier) {
    throw NodeGroupError(who + std::to_string(aggregators) + " aggregators in the tier; expected 1.." +
                         std::to_string(protocol::kMaxTier) + " ([aggregator] tier)");
  }
  if (receivers != geometry.n_sectors()) {
    throw NodeGroupError(who + std::to_string(receivers) + " aggregator threads for " +
                         std::to_string(geometry.n_sectors()) + " sectors; give one [[receivers]] per sector");
  }
  if (producer_threads.size() != receivers) {
    throw NodeGroupError(who + std::to_string(producer_threads.size()) + " producer thread counts for " +
                         std::to_string(receivers) + " receivers; give one per [[receivers]] entry");
  }
  for (std::size_t r = 0; r < producer_threads.size(); ++r) {
    if (producer_threads[r] == 0) {
      throw NodeGroupError(who + "[[receivers]] " + std::to_string(r) + " has 0 producer threads; need at least 1");
    }
  }
  if (counting_threads == 0) throw NodeGroupError(who + "[nodegroup] counting_threads must be at least 1");
  if (recv_hwm <= 0) throw NodeGroupError(who + "[nodegroup] recv_hwm must be positive");
  if (rcvbuf_bytes < 0) throw NodeGroupError(who + "[nodegroup] rcvbuf_bytes must be >= 0");
  if (pool_frames < counting_threads) {
    throw NodeGroupError(who + "[nodegroup] pool_frames = " + std::to_string(pool_frames) +
                         " is less than counting_threads = " + std::to_string(counting_threads) +
                         "; each counting thread needs at least one frame");
  }
  if (!(scan_timeout_s > 0.0) || !std::isfinite(scan_timeout_s)) {
    throw NodeGroupError(who + "[nodegroup] scan_timeout_s must be positive, got " + std::to_string(scan_timeout_s));
  }
  if (limits.max_positions == 0) throw NodeGroupError(who + "[limits] max_scan_positions must be at least 1");
  if (max_open_scans == 0) throw NodeGroupError(who + "[limits] max_open_scans must be at least 1");
  if (thresholds.sample_frames == 0) throw NodeGroupError(who + "[counting] threshold_sample_frames must be >= 1");
  const auto non_negative = [&who](const char* key, double value) {
    if (std::isnan(value)) throw NodeGroupError(who + "[counting] " + key + " is not set");
    if (!(value >= 0.0) || !std::isfinite(value)) {
      throw NodeGroupError(who + "[counting] " + key + " must be a finite number >= 0, got " + std::to_string(value));
    }
  };
  non_negative("background_sigma", thresholds.background_sigma);
  non_negative("xray_sigma", thresholds.xray_sigma);
  non_negative("background_threshold", thresholds.background_threshold);
  non_negative("xray_threshold", thresholds.xray_threshold);
  if (detectors) detectors->validate();
  if (live && !detectors) throw NodeGroupError(who + "[analysis] live needs the virtual images ([analysis] virtual_images = true)");
  if (live && live_buffer_frames == 0) throw NodeGroupError(who + "[analysis] live_buffer_frames must be at least 1");
  if (calibration && calibration->shape() != counting::FrameShape{geometry.frame_rows, geometry.frame_cols}) {
    throw NodeGroupError(who + "dark reference / gain shape " + calibration->shape().str() +
                         " differs from the detector frame " + std::to_string(geometry.frame_rows) + " x " +
                         std::to_string(geometry.frame_cols));
  }
}

std::uint32_t NodeGroupSettings::slots_per_thread() const {
  return std::max<std::uint32_t>(1, pool_frames / std::max<std::uint32_t>(1, counting_threads));
}

}  // namespace sectorflow::consumer::nodegroup
