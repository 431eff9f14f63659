#pragma once
// What the readers of one run spec share: whether it came as JSON, the notes they leave for the
// caller (aliases mapped, values normalized, fields ignored), and where a field's value was
// written when it was written under another name.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runspec/absl_view.h"
#include "runspec/field_path.h"

namespace tessera::spec {

struct ReadContext {
  // JSON (the REST API's SubmitRunRequest.spec): the protobuf JSON forms are accepted too (see
  // ParseRunSpecJson).
  bool json = false;
  std::vector<std::string> notes;
  // (field, where its value was written) for values written under another field's name, such as
  // (compute.gpus, gpu_num): errors about the field are shown where it was written.
  std::vector<std::pair<FieldPath, FieldPath>> written_as;

  // "path: text".
  void Note(const FieldPath& path, std::string_view text) {
    notes.push_back(absl::StrCat(path.ToString(), ": ", AbslView(text)));
  }
};

}  // namespace tessera::spec
