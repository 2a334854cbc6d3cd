// The one error type of the wire contracts. Messages name the field, what was expected and what
// came, and the scan/frame/sector when they are known, so a log line alone locates the fault.
#pragma once

#include <stdexcept>
#include <string>

#include "sectorflow/protocol/refusal.hpp"

namespace sectorflow::protocol {

class ProtocolError : public std::runtime_error {
 public:
  /// `kind` says which refusal counter a receiver charges the message to (refusal.hpp); decoders
  /// of network messages always give it, other users of the codec may ignore it.
  explicit ProtocolError(const std::string& what, Refusal kind = Refusal::kHeader)
      : std::runtime_error(what), kind_(kind) {}
  Refusal kind() const { return kind_; }

 private:
  Refusal kind_;
};

/// A raw fallback file that cannot be written or read (raw_file.hpp); the message names the file,
/// and for a bad record its index and byte offset.
class RawFileError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

}  // namespace sectorflow::protocol
