// How a fuzz target reports a property its decoder broke (a round trip that changed the value, a
// cheap check that disagrees with the full one): one line on stderr, then abort, which libFuzzer
// records as a crash together with the input, and which fails the corpus replay under CTest.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace sectorflow::fuzz {

/// Aborts with `what` unless `holds`.
inline void require(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property broken: %s\n", what);
  std::abort();
}

}  // namespace sectorflow::fuzz
