// The one error type of the kvstore: malformed messages, invalid schema records, sockets that
// cannot bind. Messages name the thing (key, field, address), the value and the way out.
#pragma once

#include <stdexcept>

namespace sectorflow::kvstore {

class KvstoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sectorflow::kvstore
