#include "worker/canary/canary_result.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera::canary {

v1::BandwidthSample MakeSample(int64_t payload_bytes, double seconds, int ranks) {
  v1::BandwidthSample s;
  s.set_payload_bytes(payload_bytes);
  s.set_time_seconds(seconds);
  const double algbw = seconds > 0 ? static_cast<double>(payload_bytes) / seconds / 1e9 : 0;
  s.set_algbw_gbps(algbw);
  s.set_busbw_gbps(ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0);
  return s;
}

absl::StatusOr<int64_t> ParseByteSize(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    int64_t factor;
  };
  static constexpr Unit kUnits[] = {{"gib", 1LL << 30}, {"mib", 1LL << 20},
                                    {"kib", 1LL << 10}, {"gb", 1000000000},
                                    {"mb", 1000000},    {"kb", 1000},
                                    {"g", 1LL << 30},   {"m", 1LL << 20},
                                    {"k", 1LL << 10},   {"b", 1}};
  int64_t factor = 1;
  for (const auto& u : kUnits) {
    const std::string suffix = u.suffix;
    if (t.size() > suffix.size() &&
        t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0) {
      factor = u.factor;
      t = t.substr(0, t.size() - suffix.size());
      break;
    }
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(t, &n) || n <= 0 || n > (int64_t{1} << 40) / factor) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size (like 4096, 64MiB or 1GiB)"));
  }
  return n * factor;
}

absl::StatusOr<std::vector<int64_t>> ParseByteSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    auto size = ParseByteSize(std::string(part));
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("no sizes given");
  return sizes;
}

std::string ResultToJsonLine(const v1::HealthCheckResult& result) {
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(result, &json, o);
  return json + "\n";
}

absl::StatusOr<v1::HealthCheckResult> ResultFromJsonLine(const std::string& line) {
  v1::HealthCheckResult r;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(line, &r, o).ok()) {
    return absl::InvalidArgumentError("not a canary result: " + line.substr(0, 200));
  }
  return r;
}

}  // namespace tessera::canary
