#pragma once
// JSON Schema (the OpenAPI 3.0 dialect) of protobuf messages as their JSON mapping prints them
// with proto field names: 64-bit integers are strings, enums their names, Timestamp an RFC 3339
// string, Struct an object, map fields objects.

#include <google/protobuf/descriptor.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::gateway {

// The name of a message's or enum's schema under components/schemas ("Run", "RunStatus"):
// the full name without the "tessera.v1." package.
std::string SchemaName(const std::string& full_name);

// A {"$ref": "#/components/schemas/<name>"} to `message`'s schema, adding it (and every message
// and enum it uses) to `schemas` when missing. Well-known types are inlined instead of referred.
nlohmann::json SchemaRef(const google::protobuf::Descriptor* message, nlohmann::json& schemas);

}  // namespace tessera::gateway
