#pragma once
// What the run spec tests of mcli's forms share: parsing that must succeed (with the notes it
// made), JSON errors, spec comparison and the canonical YAML round trip.

#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "runspec/run_spec_parser.h"

namespace tessera::spec::testing {

using google::protobuf::util::MessageDifferencer;
using tessera::v1::RunSpec;

struct Parsed {
  RunSpec spec;
  std::vector<std::string> notes;

  bool HasNote(const std::string& start, const std::string& also = "") const {
    for (const std::string& note : notes) {
      if (note.starts_with(start) && note.find(also) != std::string::npos) return true;
    }
    return false;
  }
};

inline Parsed MustParse(const std::string& yaml) {
  Parsed parsed;
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, &parsed.notes);
  INFO(yaml);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  parsed.spec = *std::move(spec);
  INFO("notes:\n" << absl::StrJoin(parsed.notes, "\n"));
  return parsed;
}

inline Parsed MustParseJson(const std::string& json) {
  Parsed parsed;
  absl::StatusOr<RunSpec> spec = ParseRunSpecJson(json, &parsed.notes);
  INFO(json);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  parsed.spec = *std::move(spec);
  return parsed;
}

inline std::string JsonError(const std::string& json) {
  const absl::StatusOr<RunSpec> spec = ParseRunSpecJson(json);
  INFO(json);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

inline void CheckEqual(const RunSpec& expected, const RunSpec& actual) {
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  const bool equal = differencer.Compare(expected, actual);
  INFO("differences: " << diff);
  CHECK(equal);
}

// A spec as the YAML's canonical form reads it back, with no notes the second time.
inline void RequireCanonicalRoundTrip(const RunSpec& spec) {
  const std::string yaml = RunSpecToYaml(spec);
  INFO("emitted:\n" << yaml);
  const Parsed again = MustParse(yaml);
  CHECK(again.notes.empty());
  CheckEqual(spec, again.spec);
}

}  // namespace tessera::spec::testing
