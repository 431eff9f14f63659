#pragma once
// Enum values as mcli shows and takes them: RUN_STATUS_RUNNING is "RUNNING" in tables and
// "running" (any case, or the full name) on the command line.

#include <google/protobuf/generated_enum_reflection.h>

#include <string>

#include "tessera/v1/run_spec.pb.h"

namespace tessera::cli {

// The value's name without the enum's prefix ("RUNNING"); "-" for the zero value.
std::string EnumShortName(const google::protobuf::EnumDescriptor* type, int value);

// The value named `text` (short or full name, any case). Throws CliError (exit 2) naming
// `flag` and listing the accepted values.
int ParseEnumName(const google::protobuf::EnumDescriptor* type, const std::string& flag,
                  const std::string& text);

template <typename Enum>
std::string ShortName(Enum value) {
  return EnumShortName(google::protobuf::GetEnumDescriptor<Enum>(), static_cast<int>(value));
}

template <typename Enum>
Enum ParseEnum(const std::string& flag, const std::string& text) {
  return static_cast<Enum>(ParseEnumName(google::protobuf::GetEnumDescriptor<Enum>(), flag, text));
}

// mcli's priorities: lowest, low, medium, high, and auto (= medium).
tessera::v1::Priority ParsePriority(const std::string& flag, const std::string& text);

}  // namespace tessera::cli
