#include "services/gateway/proto_schema.h"

#include <optional>

namespace tessera::gateway {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using nlohmann::json;

constexpr char kPackagePrefix[] = "tessera.v1.";

json Ref(const std::string& full_name) {
  return json{{"$ref", "#/components/schemas/" + SchemaName(full_name)}};
}

// Inline schemas for the well-known types the API uses; nullopt for other messages.
std::optional<json> WellKnown(const Descriptor* d) {
  const std::string& n = d->full_name();
  if (n == "google.protobuf.Timestamp") return json{{"type", "string"}, {"format", "date-time"}};
  if (n == "google.protobuf.Duration") {
    return json{{"type", "string"}, {"description", "seconds with an s suffix, e.g. 1.5s"}};
  }
  if (n == "google.protobuf.Struct") {
    return json{{"type", "object"}, {"additionalProperties", true}};
  }
  if (n == "google.protobuf.Value") return json{{"description", "any JSON value"}};
  if (n == "google.protobuf.ListValue") return json{{"type", "array"}, {"items", json::object()}};
  if (n == "google.protobuf.Empty") return json{{"type", "object"}};
  return std::nullopt;
}

void AddEnum(const EnumDescriptor* e, json& schemas) {
  const std::string name = SchemaName(e->full_name());
  if (schemas.contains(name)) return;
  json values = json::array();
  for (int i = 0; i < e->value_count(); ++i) values.push_back(e->value(i)->name());
  schemas[name] = json{{"type", "string"}, {"enum", values}};
}

json FieldSchema(const FieldDescriptor* f, json& schemas);

json ScalarSchema(const FieldDescriptor* f, json& schemas) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SFIXED32:
      return json{{"type", "integer"}, {"format", "int32"}};
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_FIXED32:
      return json{{"type", "integer"}, {"format", "int64"}, {"minimum", 0}};
    case FieldDescriptor::TYPE_INT64:
    case FieldDescriptor::TYPE_SINT64:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_FIXED64:
      // The JSON mapping prints 64-bit integers as strings (and reads numbers too).
      return json{{"type", "string"}, {"format", "int64"}};
    case FieldDescriptor::TYPE_DOUBLE:
      return json{{"type", "number"}, {"format", "double"}};
    case FieldDescriptor::TYPE_FLOAT:
      return json{{"type", "number"}, {"format", "float"}};
    case FieldDescriptor::TYPE_BOOL:
      return json{{"type", "boolean"}};
    case FieldDescriptor::TYPE_STRING:
      return json{{"type", "string"}};
    case FieldDescriptor::TYPE_BYTES:
      return json{{"type", "string"}, {"format", "byte"}};
    case FieldDescriptor::TYPE_ENUM:
      AddEnum(f->enum_type(), schemas);
      return Ref(f->enum_type()->full_name());
    case FieldDescriptor::TYPE_MESSAGE:
    case FieldDescriptor::TYPE_GROUP:
      return SchemaRef(f->message_type(), schemas);
  }
  return json::object();
}

json FieldSchema(const FieldDescriptor* f, json& schemas) {
  if (f->is_map()) {
    const FieldDescriptor* value = f->message_type()->map_value();
    return json{{"type", "object"}, {"additionalProperties", ScalarSchema(value, schemas)}};
  }
  json s = ScalarSchema(f, schemas);
  if (f->is_repeated()) return json{{"type", "array"}, {"items", s}};
  return s;
}

}  // namespace

std::string SchemaName(const std::string& full_name) {
  const std::string prefix = kPackagePrefix;
  if (full_name.rfind(prefix, 0) == 0) return full_name.substr(prefix.size());
  return full_name;
}

json SchemaRef(const Descriptor* message, json& schemas) {
  if (auto wk = WellKnown(message)) return *wk;
  const std::string name = SchemaName(message->full_name());
  if (!schemas.contains(name)) {
    // Claim the name first: messages may refer to themselves.
    schemas[name] = json::object();
    json properties = json::object();
    for (int i = 0; i < message->field_count(); ++i) {
      const FieldDescriptor* f = message->field(i);
      properties[f->name()] = FieldSchema(f, schemas);
    }
    schemas[name] =
        json{{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  }
  return Ref(message->full_name());
}

}  // namespace tessera::gateway
