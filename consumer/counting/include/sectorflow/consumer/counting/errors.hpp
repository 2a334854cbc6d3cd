// The one error type of electron counting: bad input (shape, dtype, calibration) and samples the
// thresholds cannot be computed from. Messages name the thing, the value and the way out.
#pragma once

#include <stdexcept>

namespace sectorflow::consumer::counting {

class CountingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sectorflow::consumer::counting
