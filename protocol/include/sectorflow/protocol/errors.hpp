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

}  // namespace sectorflow::protocol
