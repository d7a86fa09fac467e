// The key check every section of faultline's YAML configuration makes.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace faultline {

// Refuses a key of the mapping `map` that is not in `known`, or that is given twice: yaml-cpp
// ignores unknown keys and reads the first of two, so a typo (`max_tainted_precent`) would turn a
// setting off in silence. `where` prefixes the key in the message ("kubernetes.guard."). Throws
// YAML::ParserException (a std::runtime_error) marked at the key's line with "<where><key>:
// unknown key (<known, comma-separated>)" or "<where><key>: repeated key", or at the node's line
// with "<where without its last dot>: expected a mapping" when `map` is neither a mapping nor
// null (an empty section).
inline void checkKeys(const YAML::Node& map, std::string_view where,
                      std::initializer_list<std::string_view> known) {
  if (map.IsNull()) {
    return;  // `guard:` with nothing after it: an empty section
  }
  if (!map.IsMap()) {
    where.remove_suffix(where.ends_with('.') ? 1 : 0);
    throw YAML::ParserException(map.Mark(), std::string(where) + ": expected a mapping");
  }
  std::vector<std::string> seen;
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw YAML::ParserException(kv.first.Mark(), std::string(where) + key + ": repeated key");
    }
    seen.push_back(key);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (std::string_view k : known) {
        list += list.empty() ? "" : ", ";
        list += k;
      }
      throw YAML::ParserException(kv.first.Mark(),
                                  std::string(where) + key + ": unknown key (" + list + ")");
    }
  }
}

}  // namespace faultline
