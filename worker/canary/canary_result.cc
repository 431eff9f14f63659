#include "worker/canary/canary_result.h"

#include <google/protobuf/util/json_util.h>

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
