#pragma once
// The field readers of the run spec's fixed-schema part (run_spec_from_yaml.cc): readers that
// store what they read through a pointer or a setter, other spellings of a field (mcli's older
// names, protobuf's JSON names) and fields accepted and ignored with a note.

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "runspec/read_context.h"
#include "runspec/yaml_fields.h"
#include "runspec/yaml_scalar.h"

namespace tessera::spec {

// A string field, stored in *out.
FieldReader::Read StringInto(std::string* out);

// A string, or a number kept as written: mcli turns a gpu_type written as a number into text.
FieldReader::Read TextInto(std::string* out);

// In JSON, protobuf's JSON form of a number may be a string ("8"): such a string is read as the
// number it holds. The node returned is plain (its position is lost; JSON errors have none).
YAML::Node JsonNumber(const YAML::Node& node, const ReadContext& ctx);

// An integer field. 0 is the proto's "not set": unless `allow_zero` it is an error in YAML, and
// in JSON (where protobuf's JSON prints every field, 0 included) it leaves the field unset.
template <typename Set>
FieldReader::Read Int32Into(const ReadContext* ctx, Set set, std::string expected,
                            bool allow_zero) {
  return [ctx, set, expected, allow_zero](const YAML::Node& node,
                                          const FieldPath& path) -> absl::Status {
    const YAML::Node value = JsonNumber(node, *ctx);
    TESSERA_ASSIGN_OR_RETURN(const int32_t number,
                             ReadInt32(value, path, expected, allow_zero || ctx->json));
    if (number != 0 || allow_zero) set(number);
    return absl::OkStatus();
  };
}

// A number field of scheduling; 0 is the proto's "not set" for each of them (see Int32Into).
template <typename Set>
FieldReader::Read NumberInto(const ReadContext* ctx, Set set, std::string expected) {
  return [ctx, set, expected](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    const YAML::Node value = JsonNumber(node, *ctx);
    TESSERA_ASSIGN_OR_RETURN(const double number,
                             ReadNumber(value, path, expected, /*allow_zero=*/ctx->json));
    if (number != 0) set(number);
    return absl::OkStatus();
  };
}

template <typename Set>
FieldReader::Read BoolInto(ReadContext* ctx, Set set) {
  return [ctx, set](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const bool value, ReadBool(node, path, &ctx->notes));
    set(value);
    return absl::OkStatus();
  };
}

enum class Spelling {
  kMcli,          // an mcli spelling: accepted in YAML and JSON, with a note
  kMcliAndJson,   // also protobuf's JSON name: a note in YAML only
  kProtobufJson,  // protobuf's JSON name: accepted in JSON only, without a note
};

// `alias` read as `field` (the FieldReader of the field it is another spelling of). Returns
// nothing when the spelling does not apply to this input.
std::optional<FieldReader> AliasOf(std::string_view alias, const FieldReader& field,
                                   Spelling spelling, ReadContext* ctx);

// Adds to `fields` the other spelling `alias` of the field named `of` (which must be there).
void AddAlias(std::vector<FieldReader>& fields, std::string_view alias, std::string_view of,
              Spelling spelling, ReadContext* ctx);

// A field mcli took once (or still takes) that means nothing to Tessera: its value is checked
// with `check` and then ignored, with a note saying why.
FieldReader Ignored(std::string_view name, ReadContext* ctx, std::string why,
                    std::function<absl::Status(const YAML::Node&, const FieldPath&)> check);

absl::Status CheckString(const YAML::Node& node, const FieldPath& path);
absl::Status CheckCount(const YAML::Node& node, const FieldPath& path);

}  // namespace tessera::spec
