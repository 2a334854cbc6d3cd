#include "sectorflow/configs/beamline.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

// toml++ header-only (TOML_HEADER_ONLY, set by CMake): private to this file, nothing for a program
// that links the installed library to find.
#include <toml++/toml.h>

namespace sectorflow::configs {
namespace {

constexpr const char* kReceivers = "receivers";

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return node.is_array_of_tables() ? "an array of tables" : "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "true or false";
    default: return "a date or time";
  }
}

std::string shown(const toml::node& node) {
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

std::string dotted(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// Length of the longest common subsequence: the closeness "did you mean" ranks known keys by.
std::size_t common(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1, 0);
  for (const char ca : a) {
    std::size_t diagonal = 0;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = ca == b[j - 1] ? diagonal + 1 : std::max(row[j], row[j - 1]);
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean 'port'?" for the known key most like `key` (as the Python loader's difflib
// suggestion, at least 0.6 alike), else the list of known keys.
std::string suggestion(std::string_view key, const toml::table& known) {
  std::string best;
  double best_score = 0.6;
  std::string all;
  for (const auto& [name, value] : known) {
    const std::string_view candidate = name.str();
    const double score = 2.0 * static_cast<double>(common(key, candidate)) /
                         static_cast<double>(key.size() + candidate.size());
    if (score >= best_score) {
      best_score = score;
      best = std::string(candidate);
    }
    all += (all.empty() ? "" : ", ") + std::string(candidate);
  }
  return best.empty() ? "; known keys: " + all : "; did you mean '" + best + "'?";
}

// Refuses a key of `file` that `defaults` does not have, or a value of another type than its
// default. A table whose default is empty (slurm.environment) takes any keys.
void check_against(const toml::table& file, const toml::table& defaults, const std::string& prefix,
                   const std::string& source) {
  for (const auto& [name, value] : file) {
    const std::string key = dotted(prefix, name.str());
    const toml::node* expected = defaults.get(name.str());
    if (expected == nullptr) {
      throw ConfigError(source + ": unknown key '" + key + "'" + suggestion(name.str(), defaults));
    }
    const bool number = expected->is_floating_point() && value.is_integer();
    if (value.type() != expected->type() && !number) {
      throw ConfigError(source + ": '" + key + "' = " + shown(value) + ": expected " + type_name(*expected));
    }
    if (const toml::table* table = expected->as_table(); table != nullptr && !table->empty()) {
      check_against(*value.as_table(), *table, key, source);
    } else if (expected->is_array_of_tables()) {
      const toml::array& entries = *value.as_array();
      if (!entries.is_array_of_tables()) {
        throw ConfigError(source + ": '" + key + "' = " + shown(value) + ": expected " + type_name(*expected));
      }
      const toml::table& entry_defaults = *expected->as_array()->front().as_table();
      for (std::size_t i = 0; i < entries.size(); ++i) {
        check_against(*entries[i].as_table(), entry_defaults, key + "[" + std::to_string(i) + "]", source);
      }
    }
  }
}

toml::table parse_toml(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    throw ConfigError(source + ": not valid TOML: " + std::string(error.description()) + " (at line " +
                      std::to_string(begin.line) + ", column " + std::to_string(begin.column) + ")");
  }
}

const toml::table& defaults_table() {
  static const toml::table table = parse_toml(defaults_toml(), "the compiled-in defaults table");
  return table;
}

// One step of a key: a name, and an index when it names an entry of an array of tables.
struct Step {
  std::string name;
  std::optional<std::size_t> index;
};

std::vector<Step> steps_of(const std::string& key) {
  std::vector<Step> steps;
  std::size_t start = 0;
  while (start <= key.size()) {
    const std::size_t end = std::min(key.find('.', start), key.size());
    std::string part = key.substr(start, end - start);
    Step step;
    if (const std::size_t open = part.find('['); open != std::string::npos && part.back() == ']') {
      const std::string digits = part.substr(open + 1, part.size() - open - 2);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
        throw ConfigError("no configuration key '" + key + "': an index is a number in [ ]");
      }
      step.index = std::stoull(digits);
      part.resize(open);
    }
    if (part.empty()) throw ConfigError("no configuration key '" + key + "'");
    step.name = std::move(part);
    steps.push_back(std::move(step));
    start = end + 1;
  }
  return steps;
}

// The node `steps` lead to in `root`, or nullptr where one is missing. In a file (`source` given),
// an index past the end of its array is an error naming the key.
const toml::node* walk(const toml::table& root, const std::vector<Step>& steps, const std::string& key,
                       const std::string* source) {
  const toml::node* node = &root;
  for (const Step& step : steps) {
    const toml::table* table = node->as_table();
    node = table != nullptr ? table->get(step.name) : nullptr;
    if (node == nullptr) return nullptr;
    if (step.index) {
      const toml::array* array = node->as_array();
      if (array == nullptr) return nullptr;
      if (*step.index >= array->size()) {
        if (source == nullptr) return nullptr;
        throw ConfigError(*source + ": '" + key + "': the file lists " + std::to_string(array->size()) + " [[" +
                          step.name + "]], numbered from 0");
      }
      node = array->get(*step.index);
    }
  }
  return node;
}

// The file's node for `key`, else its default (an entry's default is the defaults table's first
// entry: every entry of an array of tables has the same defaults).
const toml::node& lookup(const toml::table& file, const std::string& source, const std::string& key) {
  std::vector<Step> steps = steps_of(key);
  if (const toml::node* node = walk(file, steps, key, &source)) return *node;
  for (Step& step : steps) {
    if (step.index) step.index = 0;
  }
  if (const toml::node* node = walk(defaults_table(), steps, key, nullptr)) return *node;
  throw ConfigError("no configuration key '" + key + "' (docs/configuration.md lists them)");
}

[[noreturn]] void wrong_type(const std::string& source, const std::string& key, const toml::node& node,
                             const char* expected) {
  throw ConfigError(source + ": '" + key + "' = " + shown(node) + ": expected " + expected);
}

}  // namespace

struct Beamline::Impl {
  std::string source;
  toml::table file;
};

Beamline::Beamline(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Beamline Beamline::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the configuration file (does it exist?)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read the configuration file");
  return parse(text.str(), path);
}

Beamline Beamline::parse(const std::string& text, const std::string& source) {
  auto impl = std::make_shared<Impl>();
  impl->source = source;
  impl->file = parse_toml(text, source);
  check_against(impl->file, defaults_table(), "", source);
  const toml::array* receivers = impl->file[kReceivers].as_array();
  if (receivers == nullptr || receivers->empty()) {
    throw ConfigError(source + ": 'receivers' must be a non-empty array of tables ([[receivers]]), one per sector");
  }
  return Beamline(std::move(impl));
}

const Beamline& Beamline::defaults() {
  static const Beamline table = parse(defaults_toml(), "the compiled-in defaults table");
  return table;
}

const std::string& Beamline::source() const { return impl_->source; }

std::size_t Beamline::receivers() const { return impl_->file[kReceivers].as_array()->size(); }

std::int64_t Beamline::integer(const std::string& key) const {
  const toml::node& node = lookup(impl_->file, impl_->source, key);
  if (const auto* value = node.as_integer()) return value->get();
  wrong_type(impl_->source, key, node, "an integer");
}

double Beamline::number(const std::string& key) const {
  const toml::node& node = lookup(impl_->file, impl_->source, key);
  if (const auto* value = node.as_floating_point()) return value->get();
  if (const auto* value = node.as_integer()) return static_cast<double>(value->get());
  wrong_type(impl_->source, key, node, "a number");
}

bool Beamline::boolean(const std::string& key) const {
  const toml::node& node = lookup(impl_->file, impl_->source, key);
  if (const auto* value = node.as_boolean()) return value->get();
  wrong_type(impl_->source, key, node, "true or false");
}

std::string Beamline::text(const std::string& key) const {
  const toml::node& node = lookup(impl_->file, impl_->source, key);
  if (const auto* value = node.as_string()) return value->get();
  wrong_type(impl_->source, key, node, "a string");
}

std::vector<std::string> Beamline::texts(const std::string& key) const {
  const toml::node& node = lookup(impl_->file, impl_->source, key);
  const toml::array* array = node.as_array();
  if (array == nullptr) wrong_type(impl_->source, key, node, "an array of strings");
  std::vector<std::string> values;
  for (const toml::node& item : *array) {
    const auto* value = item.as_string();
    if (value == nullptr) wrong_type(impl_->source, key, node, "an array of strings");
    values.push_back(value->get());
  }
  return values;
}

}  // namespace sectorflow::configs
