// The one error type of the aggregator: sockets that cannot bind, invalid options, a relay thread
// that failed. Messages name the thread, the address or the option and the way out.
#pragma once

#include <stdexcept>

namespace sectorflow::aggregator {

class AggregatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sectorflow::aggregator
