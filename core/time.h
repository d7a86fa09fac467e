// Event-time helpers. All times are int64 nanoseconds since the Unix epoch, UTC.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace faultline {

inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Live, how far past the service's clock a record's time is taken as it is (ns): later times are
// taken as that bound (Pipeline::match). NTP keeps clocks within milliseconds; a minute leaves
// room for a clock stepped late and stays well under max_lag's default.
inline constexpr int64_t kMaxAheadNs = 60 * kNanosPerSecond;

// The whole second of event time `time_ns` falls in (rounded down, also before the epoch).
inline constexpr int64_t secondOf(int64_t time_ns) {
  return time_ns / kNanosPerSecond - (time_ns % kNanosPerSecond < 0 ? 1 : 0);
}

// Whether the fields name a real date and time: month 1..12, day within that month of that year
// (proleptic Gregorian), hour 0..23, minute 0..59, second 0..60 (60: a leap second).
bool isValidCivil(int year, int month, int day, int hour, int minute, int second);

// Civil UTC date and time to ns since the epoch. month 1..12, day 1..31.
int64_t civilToNanos(int year, int month, int day, int hour, int minute, int second,
                     int64_t nanos = 0);

// RFC 3339 with nanoseconds and "Z": 2025-02-23T16:24:18.123456789Z.
std::string formatRfc3339(int64_t time_ns);

// Parses RFC 3339 / ISO 8601 timestamps: "2025-02-23T16:24:18Z", with a fraction of up to 9
// digits after '.' or ',', and a "Z" or "+hh:mm"/"+hhmm" offset (no offset = UTC). Also accepts a
// space instead of 'T', and 't' and 'z' (RFC 3339 5.6). Rejects dates and times that do not exist
// (isValidCivil), offsets beyond +-23:59 and years outside 1678..2261 (beyond int64 ns). With
// `consumed`, the stamp may be followed by other text, and on success the number of characters it
// took is stored there; without, the whole text must be the stamp ("12:00:00 +0200" is none). On
// success stores ns; on failure changes nothing.
bool parseRfc3339(std::string_view text, int64_t* time_ns, size_t* consumed = nullptr);

// Parses a duration such as "90s", "10m", "1h", "500ms", "2d" or "1h30m", or "0" (the zero
// duration needs no unit, as in Go's time.ParseDuration; rules/README.md: `stable: 0`). Returns
// false on anything else.
bool parseDuration(std::string_view text, int64_t* nanos);

// "Jan".."Dec" to 1..12, 0 if not a month abbreviation.
int monthFromAbbrev(std::string_view abbrev);

// Current wall-clock time in ns since the epoch.
int64_t nowNanos();

}  // namespace faultline
