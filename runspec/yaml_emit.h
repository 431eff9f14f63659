#pragma once
// Writing run spec values with YAML::Emitter so that ParseRunSpec reads them back unchanged.

#include <string_view>

#include "google/protobuf/struct.pb.h"
#include "yaml-cpp/yaml.h"

namespace tessera::spec {

// A string value: plain when that cannot be read as anything else, a literal block (|) for
// simple multi-line text such as a command, double-quoted otherwise.
void EmitString(YAML::Emitter& out, std::string_view text);

// A mapping key (the caller emits YAML::Value and the value next).
void EmitKey(YAML::Emitter& out, std::string_view key);

// A number in the shortest form that reads back as the same double (.inf, -.inf, .nan for the
// non-finite ones).
void EmitNumber(YAML::Emitter& out, double value);

void EmitValue(YAML::Emitter& out, const google::protobuf::Value& value);

// The entries of `fields` as key/value pairs of a mapping the caller has begun, in key order,
// leaving out `skip_key` when it is not empty.
void EmitStructEntries(YAML::Emitter& out, const google::protobuf::Struct& fields,
                       std::string_view skip_key = {});

}  // namespace tessera::spec
