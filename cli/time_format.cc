#include "cli/time_format.h"

#include <cctype>
#include <cmath>
#include <cstdint>

#include "base/timestamps.h"
#include "cli/errors.h"

namespace tessera::cli {
namespace {

// Parses "1h30m"-style ages; false when `text` is not one.
bool ParseAge(const std::string& text, absl::Duration* age) {
  if (text.empty()) return false;
  absl::Duration total = absl::ZeroDuration();
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    int64_t amount = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (amount > 1'000'000'000) return false;
      amount = amount * 10 + (text[i] - '0');
      ++i;
    }
    if (i == text.size()) return false;  // a number needs its unit
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 's':
        total += absl::Seconds(amount);
        break;
      case 'm':
        total += absl::Minutes(amount);
        break;
      case 'h':
        total += absl::Hours(amount);
        break;
      case 'd':
        total += absl::Hours(24 * amount);
        break;
      case 'w':
        total += absl::Hours(24 * 7 * amount);
        break;
      default:
        return false;
    }
    ++i;
  }
  *age = total;
  return true;
}

}  // namespace

absl::Time ParseTimeArg(const std::string& flag, const std::string& text, absl::Time now) {
  absl::Duration age;
  if (ParseAge(text, &age)) return now - age;
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &time, &error)) return time;
  if (absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &time, &error)) return time;
  ThrowUsage(flag + ": \"" + text +
             "\" is not a time: use RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or an "
             "age (30m, 2h, 1d, 1w)");
}

bool IsSet(const google::protobuf::Timestamp& timestamp) {
  return timestamp.seconds() != 0 || timestamp.nanos() != 0;
}

std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (!IsSet(timestamp)) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", FromProtoTime(timestamp), absl::LocalTimeZone());
}

std::string FormatSeconds(double seconds) {
  if (!(seconds >= 1)) return seconds > 0 ? "<1s" : "-";
  if (seconds > 1e12) return "a very long time";
  const int64_t total = static_cast<int64_t>(std::llround(seconds));
  const int64_t days = total / 86400;
  const int64_t hours = total % 86400 / 3600;
  const int64_t minutes = total % 3600 / 60;
  const int64_t secs = total % 60;
  auto pair = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    std::string text = std::to_string(a) + ua;
    if (b > 0) text += " " + std::to_string(b) + ub;
    return text;
  };
  if (days > 0) return pair(days, "d", hours, "h");
  if (hours > 0) return pair(hours, "h", minutes, "m");
  if (minutes > 0) return pair(minutes, "m", secs, "s");
  return std::to_string(secs) + "s";
}

}  // namespace tessera::cli
