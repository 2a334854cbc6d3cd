// The producer's errors. Messages name the scan, frame and sector when they are known, what was
// expected and what came, so that one log line locates the fault.
#pragma once

#include <stdexcept>

namespace sectorflow::producer {

/// Bad input (a payload of the wrong size, an empty scan shape, another receiver's sector, a frame
/// that is not this thread's) or a scan that cannot proceed (no routing, a file that exists).
class ProducerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Producer::stop() interrupted a scan; what was already handed to ZeroMQ is still delivered.
class ProducerStopped : public ProducerError {
 public:
  using ProducerError::ProducerError;
};

}  // namespace sectorflow::producer
