// Fuzzes the run spec parser: any input must give a spec or one located InvalidArgument error
// (never a crash, hang or exception), and every spec it accepts must pass ValidateRunSpec and
// survive RunSpecToYaml -> ParseRunSpec unchanged.

#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "runspec/run_spec_parser.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "run_spec_fuzzer: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<tessera::v1::RunSpec> spec = tessera::spec::ParseRunSpec(text);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StartsWith(spec.status().message(), "line ")) {
      Fail("error is not a located InvalidArgument", spec.status().ToString());
    }
    return 0;
  }
  if (const absl::Status valid = tessera::spec::ValidateRunSpec(*spec); !valid.ok()) {
    Fail("a parsed spec fails ValidateRunSpec", valid.ToString());
  }
  const std::string yaml = tessera::spec::RunSpecToYaml(*spec);
  const absl::StatusOr<tessera::v1::RunSpec> again = tessera::spec::ParseRunSpec(yaml);
  if (!again.ok())
    Fail("RunSpecToYaml output does not parse", again.status().ToString() + "\n" + yaml);
  if (!google::protobuf::util::MessageDifferencer::Equals(*spec, *again)) {
    Fail("round trip changed the spec",
         spec->DebugString() + "---\n" + again->DebugString() + "---\n" + yaml);
  }
  return 0;
}
