// The one error type of the wire contracts. Messages name the field, what was expected and what
// came, and the scan/frame/sector when they are known, so a log line alone locates the fault.
#pragma once

#include <stdexcept>
#include <string>

namespace sectorflow::protocol {

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A raw fallback file that cannot be written or read (raw_file.hpp); the message names the file,
/// and for a bad record its index and byte offset.
class RawFileError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

}  // namespace sectorflow::protocol
