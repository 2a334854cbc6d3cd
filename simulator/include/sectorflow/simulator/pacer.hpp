// Pacing to a frame rate: frame i is due at epoch + i / rate_hz. Threads that share a Pacer each
// wait for their own frame indices, so T producer threads together hold the detector's rate
// without talking to each other, and a late thread catches up instead of drifting.
#pragma once

#include <chrono>
#include <cstdint>

namespace sectorflow::simulator {

class Pacer {
 public:
  /// `rate_hz` frames per second; 0 means unpaced (wait() returns at once). The epoch is now.
  /// Throws SimulatorError for a negative or non-finite rate.
  explicit Pacer(double rate_hz);

  double rate_hz() const { return rate_hz_; }

  /// Makes now the epoch (frame 0 due at once). Not concurrent with wait().
  void restart();

  /// Blocks until frame `index` is due; returns at once when it already is. Thread-safe.
  void wait(std::uint64_t index) const;

  /// Seconds from now until frame `index` is due (0 or less once it is; 0 unpaced).
  double seconds_until(std::uint64_t index) const;

 private:
  std::chrono::steady_clock::time_point due(std::uint64_t index) const;

  double rate_hz_;
  std::chrono::steady_clock::time_point epoch_;
};

}  // namespace sectorflow::simulator
