#pragma once

#include <stdexcept>

namespace sectorflow::security {

/// A key, a certificate or a key directory that cannot be used; the message names the file.
class SecurityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sectorflow::security
