// How every section of faultline's YAML configuration reads itself: its keys checked, its values
// typed. Every error is a YAML::ParserException (a std::runtime_error) marked at the line of the
// key or value at fault, which loadServiceConfig (core/config.h) reports as "<file>:<line>: ...".
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/time.h"

namespace faultline {

namespace yaml_detail {

// Throws YAML::ParserException marked at a quoted scalar of `node`'s tree (of `text`) whose quote
// is not closed before the end of `text`.
inline void checkQuotesClose(const YAML::Node& node, std::string_view text) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      checkQuotesClose(kv.first, text);
      checkQuotesClose(kv.second, text);
    }
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      checkQuotesClose(item, text);
    }
  } else if (node.IsScalar()) {
    const YAML::Mark mark = node.Mark();
    const auto at = static_cast<size_t>(mark.pos);
    if (mark.pos < 0 || at >= text.size() || (text[at] != '\'' && text[at] != '"')) {
      return;  // plain, a block scalar (| >), or an alias
    }
    const char quote = text[at];
    for (size_t i = at + 1; i < text.size(); ++i) {
      if (quote == '"' && text[i] == '\\') {
        ++i;  // an escape: \" is no closing quote
      } else if (text[i] == quote) {
        if (quote == '"' || i + 1 >= text.size() || text[i + 1] != '\'') {
          return;
        }
        ++i;  // '' is a quote inside single quotes
      }
    }
    throw YAML::ParserException(mark, "a quote opened here is not closed");
  }
}

}  // namespace yaml_detail

// The first YAML document of `text`. yaml-cpp (0.7) reads a quote left open as a scalar running to
// the end of the text, where libyaml and PyYAML refuse it ("found unexpected end of stream"): the
// keys after it would vanish into that value (a `dry_run: true`, the rules of a file). Throws
// YAML::ParserException (a std::runtime_error) marked at the error's line, that one included.
inline YAML::Node loadYaml(const std::string& text) {
  YAML::Node root = YAML::Load(text);
  // yaml-cpp skips a UTF-8 byte order mark: its marks count from after it.
  std::string_view marked = text;
  if (marked.starts_with("\xEF\xBB\xBF")) {
    marked.remove_prefix(3);
  }
  yaml_detail::checkQuotesClose(root, marked);
  return root;
}

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

// Throws YAML::ParserException marked at `node`'s line with "<path>: <what>". A key absent from
// the document (map["key"]) has no line: pass its mapping instead.
[[noreturn]] inline void failAt(const YAML::Node& node, const std::string& path,
                                const std::string& what) {
  throw YAML::ParserException(node.Mark(), path + ": " + what);
}

// The text of the scalar `node`. Throws (failAt) "<path>: expected a string" if it is a list, a
// mapping or null (`key:` with nothing after it).
inline std::string stringAt(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) {
    failAt(node, path, "expected a string");
  }
  return node.Scalar();
}

// The string at map[key] (stringAt, path "<where><key>"), or `fallback` when the key is absent or
// null (`key:` with nothing after it).
inline std::string stringOr(const YAML::Node& map, const std::string& where, const char* key,
                            const std::string& fallback) {
  const YAML::Node n = map[key];
  return !n || n.IsNull() ? fallback : stringAt(n, where + key);
}

// The boolean `node` (true/false; yaml-cpp also reads yes/no, on/off). Throws (failAt)
// "<path>: expected true or false, got '<text>'". yaml-cpp's as<bool>(fallback) would return the
// fallback for `dry_run: maybe`: a setting meant to hold faultline back, turned off in silence.
inline bool boolAt(const YAML::Node& node, const std::string& path) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    failAt(node, path,
           "expected true or false, got '" + (node.IsScalar() ? node.Scalar() : "") + "'");
  }
  return value;
}

// The finite number `node`, in [min, max]. Throws (failAt) "<path>: expected a number from <min>
// to <max>, got '<text>'".
inline double numberAt(const YAML::Node& node, const std::string& path, double min, double max) {
  double value = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value) ||
      value < min || value > max) {
    failAt(node, path,
           "expected a number from " + YAML::Node(min).Scalar() + " to " +
               YAML::Node(max).Scalar() + ", got '" + (node.IsScalar() ? node.Scalar() : "") + "'");
  }
  return value;
}

// The integer `node`, in [min, max]. Throws (failAt) "<path>: expected an integer >= <min>", or
// "... from <min> to <max>" when max is given.
template <typename T>
T integerAt(const YAML::Node& node, const std::string& path, T min,
            T max = std::numeric_limits<T>::max()) {
  T value{};
  if (!node.IsScalar() || !YAML::convert<T>::decode(node, value) || value < min || value > max) {
    failAt(node, path,
           "expected an integer " +
               (max == std::numeric_limits<T>::max()
                    ? ">= " + std::to_string(min)
                    : "from " + std::to_string(min) + " to " + std::to_string(max)));
  }
  return value;
}

// The duration `node` (parseDuration, core/time.h: "10m", "1h30m") in ns, above 0. Throws
// (failAt) "<path>: expected a duration like 10m, got '<text>'".
inline int64_t durationAt(const YAML::Node& node, const std::string& path) {
  int64_t ns = 0;
  if (!node.IsScalar() || !parseDuration(node.Scalar(), &ns) || ns <= 0) {
    failAt(node, path,
           "expected a duration like 10m, got '" + (node.IsScalar() ? node.Scalar() : "") + "'");
  }
  return ns;
}

// The list of strings `node`. Throws (failAt) "<path>: expected a list of strings" (with
// `non_empty`: "a non-empty list of strings"), or "<path>[i]: expected a string".
inline std::vector<std::string> stringsAt(const YAML::Node& node, const std::string& path,
                                          bool non_empty) {
  if (!node.IsSequence() || (non_empty && node.size() == 0)) {
    failAt(node, path,
           non_empty ? "expected a non-empty list of strings" : "expected a list of strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(stringAt(node[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

}  // namespace faultline
