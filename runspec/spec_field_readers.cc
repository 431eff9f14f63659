#include "runspec/spec_field_readers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::spec {

FieldReader::Read StringInto(std::string* out) {
  return [out](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(*out, ReadString(node, path));
    return absl::OkStatus();
  };
}

// A string, or a number kept as written: mcli turns a gpu_type written as a number into text.
FieldReader::Read TextInto(std::string* out) {
  return [out](const YAML::Node& node, const FieldPath& path) -> absl::Status {
    const TypedScalar scalar = ResolveScalar(node);
    if (node.IsScalar() && (scalar.kind == ScalarKind::kInt || scalar.kind == ScalarKind::kFloat)) {
      *out = std::string(scalar.text);
      return absl::OkStatus();
    }
    TESSERA_ASSIGN_OR_RETURN(*out, ReadString(node, path));
    return absl::OkStatus();
  };
}

// In JSON, protobuf's JSON form of a number may be a string ("8"): such a string is read as the
// number it holds. The node returned is plain (its position is lost; JSON errors have none).
YAML::Node JsonNumber(const YAML::Node& node, const ReadContext& ctx) {
  if (!ctx.json || !node.IsScalar() || node.Tag() == kPlainTag) return node;
  const ScalarKind kind = ResolvePlain(node.Scalar()).kind;
  if (kind != ScalarKind::kInt && kind != ScalarKind::kFloat) return node;
  YAML::Node plain(node.Scalar());
  plain.SetTag(std::string(kPlainTag));
  return plain;
}

// `alias` read as `field` (the FieldReader of the field it is another spelling of). Returns
// nothing when the spelling does not apply to this input.
std::optional<FieldReader> AliasOf(std::string_view alias, const FieldReader& field,
                                   Spelling spelling, ReadContext* ctx) {
  if (spelling == Spelling::kProtobufJson && !ctx->json) return std::nullopt;
  const bool noted =
      spelling == Spelling::kMcli || (spelling == Spelling::kMcliAndJson && !ctx->json);
  FieldReader::Read read = [ctx, noted, canonical = field.name, read = field.read](
                               const YAML::Node& node, const FieldPath& path) -> absl::Status {
    if (noted) {
      FieldPath as = path;
      as.Pop();
      ctx->Note(path, absl::StrCat("read as ", as.Field(canonical).ToString()));
    }
    return read(node, path);
  };
  return FieldReader{alias, std::move(read), field.name};
}

void AddAlias(std::vector<FieldReader>& fields, std::string_view alias, std::string_view of,
              Spelling spelling, ReadContext* ctx) {
  const auto field = std::find_if(fields.begin(), fields.end(),
                                  [&](const FieldReader& f) { return f.name == of; });
  if (std::optional<FieldReader> reader = AliasOf(alias, *field, spelling, ctx)) {
    fields.push_back(*std::move(reader));
  }
}

// A field mcli took once (or still takes) that means nothing to Tessera: its value is checked
// with `check` and then ignored, with a note saying why.
FieldReader Ignored(std::string_view name, ReadContext* ctx, std::string why,
                    std::function<absl::Status(const YAML::Node&, const FieldPath&)> check) {
  return FieldReader{name,
                     [ctx, why, check](const YAML::Node& node, const FieldPath& path) {
                       TESSERA_RETURN_IF_ERROR(check(node, path));
                       ctx->Note(path, absl::StrCat("ignored: ", why));
                       return absl::OkStatus();
                     },
                     {},
                     /*unlisted=*/true};
}

absl::Status CheckString(const YAML::Node& node, const FieldPath& path) {
  return ReadString(node, path).status();
}

absl::Status CheckCount(const YAML::Node& node, const FieldPath& path) {
  return ReadInt32(node, path, "a non-negative integer").status();
}

}  // namespace tessera::spec
