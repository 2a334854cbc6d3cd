// What a NodeGroup hands over when it has finished a scan (SPEC.md step 6): the counted frames it
// received, what it expected and what came, and how the thresholds were chosen. Rank 0 merges
// the results of every NodeGroup of the scan's routing list into one file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sectorflow/consumer/counting/thresholds.hpp"
#include "sectorflow/consumer/nodegroup/virtual_images.hpp"
#include "sectorflow/protocol/scan_records.hpp"

namespace sectorflow::consumer::nodegroup {

struct ScanResult {
  std::uint32_t scan_number = 0;
  std::uint32_t scan_x = 0;  ///< probe positions per row (0 if no data message came)
  std::uint32_t scan_y = 0;  ///< rows of probe positions
  std::vector<std::string> routing;  ///< routing list of the scan's info messages (empty if none came)

  /// Counted frames, in no particular order: frame i is at flat position positions[i] and its
  /// events are events[offsets[i] .. offsets[i + 1]).
  std::vector<std::uint64_t> positions;
  std::vector<std::uint32_t> events;
  std::vector<std::uint64_t> offsets{0};
  /// The frames' virtual images, aligned with `positions` (empty when the NodeGroup makes none:
  /// NodeGroupSettings::detectors unset).
  VirtualImages images;
  /// Frames counted with sectors missing (zeros in their place) and the sectors each lacked.
  std::vector<std::uint64_t> incomplete_positions;
  std::vector<std::vector<std::uint32_t>> incomplete_missing_sectors;

  bool thresholds_known = false;
  bool thresholds_shared = false;  ///< the scan's thresholds, fitted from every NodeGroup's sample (ThresholdSettings::share_ms)
  counting::ThresholdStatistics statistics;
  std::string threshold_error;  ///< why no thresholds could be computed (the frames stay uncounted)
  std::uint64_t uncounted_frames = 0;  ///< frames received but not counted (threshold_error)

  /// Per aggregator thread r: data messages announced by its info message (-1: none came) and
  /// received on port r.
  std::vector<std::int64_t> expected;
  std::vector<std::uint64_t> received;
  /// Every run heard per port (SPEC.md "Runs of a scan at the NodeGroups") when some port heard
  /// more than one; empty when each heard one (expected and received say it all).
  std::vector<protocol::PortRun> runs;
  bool timed_out = false;         ///< finished by nodegroup.scan_timeout_s, not by completion
  bool evicted = false;           ///< of those, closed early to make room for a newer scan ([limits])
  std::uint64_t bytes = 0;        ///< payload bytes received
  std::uint64_t late_messages = 0;  ///< data of this scan that came after its end, dropped
  std::uint64_t duplicate_sectors = 0;  ///< a sector that came twice (the first one counts)
  std::uint64_t evicted_frames = 0;     ///< incomplete frames counted early because the pool was full
  std::uint64_t frames_complete = 0;
  std::uint64_t frames_incomplete = 0;
  /// Per receiver r: its sectors in the frames counted here (an incomplete frame lacks some), so
  /// that the scan's file record can say how many of each receiver's sectors the file holds.
  std::vector<std::uint64_t> sectors_counted;
  double first_message_s = 0.0;  ///< wall clock (Unix seconds) of the first message of the scan
  double last_message_s = 0.0;   ///< of the last one
  double finished_s = 0.0;       ///< when every counting thread was done
};

}  // namespace sectorflow::consumer::nodegroup
