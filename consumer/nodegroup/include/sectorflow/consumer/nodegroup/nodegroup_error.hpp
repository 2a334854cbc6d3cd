// The error of the NodeGroup data path: bad settings, a socket that cannot be bound.
#pragma once

#include <stdexcept>

namespace sectorflow::consumer::nodegroup {

class NodeGroupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sectorflow::consumer::nodegroup
