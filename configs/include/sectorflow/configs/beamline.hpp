// A beamline configuration file read from C++ (configs/*.toml; every key in
// docs/configuration.md): what a receiver program that embeds sectorflow reads instead of copying
// values from the file.
//
// A key the file leaves out has its default from the defaults table, configs/defaults.toml, which
// is generated from configs/schema.py (the one source of defaults, also the Python loader's) and
// compiled into this library: an installed program needs no file or path for it. The table also
// says which keys exist and of what type, so a key it does not know (with a "did you mean") or a
// value of another type is refused when the file is read. Ranges are not checked here: the option
// structs check what they are given (validate(), the constructors), and the Python loader checks
// a whole file (`sectorflow` reads it at start-up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace sectorflow::configs {

/// A configuration that cannot be used; the message names the file, the key and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One parsed beamline file over the defaults table. Cheap to copy (the parsed file is shared and
/// immutable); thread-safe to read.
class Beamline {
 public:
  /// Reads `path`. Throws ConfigError for a missing or unreadable file, bad TOML, an unknown key,
  /// a value whose type is not its key's, or a file without [[receivers]].
  static Beamline load(const std::string& path);
  /// Parses TOML text as load() does; `source` names it in messages.
  static Beamline parse(const std::string& text, const std::string& source);
  /// The defaults table itself: every key at its default, one receiver per default sector.
  static const Beamline& defaults();

  /// The file (or source) this configuration came from.
  const std::string& source() const;
  /// Values by dotted key: "producer.send_hwm", "receivers[2].threads". A key the file leaves out
  /// has its default; a receiver's key its receiver default. Throws ConfigError for a key the
  /// table does not know, a receiver index past the file's [[receivers]], or a value of another
  /// type (number() takes integers too, as the loader does).
  std::int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  std::string text(const std::string& key) const;
  bool boolean(const std::string& key) const;
  /// integer(key) as a T: a value T cannot hold (a negative count, a port above 65535) is a
  /// ConfigError naming the key instead of a number wrapped around.
  template <typename T>
  T whole(const std::string& key) const;
  /// An array of strings ("kvstore.servers"); throws ConfigError for another type or a non-string entry.
  std::vector<std::string> texts(const std::string& key) const;
  /// The [[receivers]] of the file: receiver r reads sector r.
  std::size_t receivers() const;

 private:
  struct Impl;
  explicit Beamline(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

template <typename T>
T Beamline::whole(const std::string& key) const {
  const std::int64_t value = integer(key);
  bool fits = false;
  if (value >= 0) {
    fits = static_cast<std::uint64_t>(value) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  } else if constexpr (std::is_signed_v<T>) {
    fits = value >= static_cast<std::int64_t>(std::numeric_limits<T>::min());
  }
  if (!fits) {
    throw ConfigError(source() + ": '" + key + "' = " + std::to_string(value) + ": expected a value from " +
                      std::to_string(std::numeric_limits<T>::min()) + " to " +
                      std::to_string(std::numeric_limits<T>::max()));
  }
  return static_cast<T>(value);
}

/// The defaults table as compiled in (configs/defaults.toml of the build).
const char* defaults_toml();

}  // namespace sectorflow::configs
