#include "core/time.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace faultline {
namespace {

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) {
    return false;
  }
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      return false;
    }
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool isValidCivil(int year, int month, int day, int hour, int minute, int second) {
  if (month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
      second < 0 || second > 60) {
    return false;
  }
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
  return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

int64_t civilToNanos(int year, int month, int day, int hour, int minute, int second,
                     int64_t nanos) {
  const int64_t days =
      daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return ((days * 24 + hour) * 60 + minute) * 60 * kNanosPerSecond +
         static_cast<int64_t>(second) * kNanosPerSecond + nanos;
}

std::string formatRfc3339(int64_t time_ns) {
  int64_t secs = time_ns / kNanosPerSecond;
  int64_t frac = time_ns % kNanosPerSecond;
  if (frac < 0) {
    frac += kNanosPerSecond;
    --secs;
  }
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  // civil_from_days (H. Hinnant)
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%09lldZ",
                static_cast<long long>(y), m, d, static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60),
                static_cast<long long>(frac));
  return buf.data();
}

bool parseRfc3339(std::string_view s, int64_t* time_ns, size_t* consumed) {
  int y = 0;
  int mo = 0;
  int d = 0;
  int h = 0;
  int mi = 0;
  int sec = 0;
  if (!digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !digits(s, 5, 2, &mo) ||
      s[7] != '-' || !digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !digits(s, 11, 2, &h) || s[13] != ':' || !digits(s, 14, 2, &mi) || s[16] != ':' ||
      !digits(s, 17, 2, &sec)) {
    return false;
  }
  // int64 nanoseconds since the epoch span 1677..2262.
  if (y < 1678 || y > 2261 || !isValidCivil(y, mo, d, h, mi, sec)) {
    return false;
  }
  size_t i = 19;
  int64_t nanos = 0;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    ++i;
    int64_t scale = kNanosPerSecond / 10;
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      nanos += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (i == start) {
      return false;
    }
  }
  int64_t offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int64_t sign = s[i] == '-' ? -1 : 1;
    int oh = 0;
    int om = 0;
    if (!digits(s, i + 1, 2, &oh)) {
      return false;
    }
    size_t j = i + 3;
    if (j < s.size() && s[j] == ':') {
      ++j;
    }
    if (!digits(s, j, 2, &om) || oh > 23 || om > 59) {
      return false;
    }
    offset_s = sign * (oh * 3600 + om * 60);
    i = j + 2;
  }
  if (consumed != nullptr) {
    *consumed = i;
  } else if (i != s.size()) {
    return false;
  }
  *time_ns = civilToNanos(y, mo, d, h, mi, sec, nanos) - offset_s * kNanosPerSecond;
  return true;
}

bool parseDuration(std::string_view s, int64_t* nanos) {
  if (s == "0") {
    *nanos = 0;
    return true;
  }
  if (s.empty()) {
    return false;
  }
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    int64_t v = 0;
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 12) {
      v = v * 10 + (s[i] - '0');
      ++i;
    }
    if (i == start || i == s.size()) {
      return false;
    }
    int64_t unit = 0;
    if (s.substr(i, 2) == "ms") {
      unit = kNanosPerSecond / 1000;
      i += 2;
    } else {
      switch (s[i]) {
        case 's':
          unit = kNanosPerSecond;
          break;
        case 'm':
          unit = 60 * kNanosPerSecond;
          break;
        case 'h':
          unit = 3600 * kNanosPerSecond;
          break;
        case 'd':
          unit = 86400 * kNanosPerSecond;
          break;
        default:
          return false;
      }
      ++i;
    }
    if (v > (INT64_MAX - total) / unit) {
      return false;  // longer than int64 nanoseconds hold
    }
    total += v * unit;
  }
  *nanos = total;
  return true;
}

int monthFromAbbrev(std::string_view a) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i) {
    if (a == kMonths[i]) {
      return static_cast<int>(i) + 1;
    }
  }
  return 0;
}

int64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace faultline
