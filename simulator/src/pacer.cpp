#include "sectorflow/simulator/pacer.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "sectorflow/simulator/settings.hpp"

namespace sectorflow::simulator {

Pacer::Pacer(double rate_hz) : rate_hz_(rate_hz), epoch_(std::chrono::steady_clock::now()) {
  if (!std::isfinite(rate_hz) || rate_hz < 0.0) {
    throw SimulatorError("pacer: rate_hz = " + std::to_string(rate_hz) + ": expected 0 (unpaced) or a positive rate");
  }
}

void Pacer::restart() { epoch_ = std::chrono::steady_clock::now(); }

std::chrono::steady_clock::time_point Pacer::due(std::uint64_t index) const {
  // A rate from a request can be tiny (1e-300 Hz): a frame due beyond the clock's range (about
  // 292 years in nanoseconds) would overflow the conversion, so the offset stops at a century.
  constexpr double kMaxOffsetS = 100.0 * 365 * 24 * 3600;
  const std::chrono::duration<double> offset(std::min(static_cast<double>(index) / rate_hz_, kMaxOffsetS));
  return epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(offset);
}

void Pacer::wait(std::uint64_t index) const {
  if (rate_hz_ <= 0.0) return;
  std::this_thread::sleep_until(due(index));
}

double Pacer::seconds_until(std::uint64_t index) const {
  if (rate_hz_ <= 0.0) return 0.0;
  return std::chrono::duration<double>(due(index) - std::chrono::steady_clock::now()).count();
}

}  // namespace sectorflow::simulator
