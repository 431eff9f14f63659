#pragma once
// The path of a field in a run spec, spelled the way the YAML spells it: "compute.gpus",
// "env_variables[2].key", "parameters.optimizer.lr". The validator reports errors by path; the
// YAML parser turns a path back into a line and column.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::spec {

class FieldPath {
 public:
  // One step: a mapping key, or (when index >= 0) a position in a sequence. In env_variables'
  // mapping form an index selects the index-th pair of the mapping.
  struct Element {
    std::string key;
    int index = -1;
    bool is_index() const { return index >= 0; }
  };

  FieldPath() = default;
  explicit FieldPath(std::string_view key) { Push(key); }

  FieldPath Field(std::string_view key) const;
  FieldPath Index(int index) const;

  void Push(std::string_view key) { elements_.push_back({std::string(key), -1}); }
  void PushIndex(int index) { elements_.push_back({std::string(), index}); }
  void Pop() { elements_.pop_back(); }

  const std::vector<Element>& elements() const { return elements_; }
  bool empty() const { return elements_.empty(); }

  // "compute.node_names[1]"; keys that are not plain identifiers are quoted and shortened.
  std::string ToString() const;

 private:
  std::vector<Element> elements_;
};

// A rule a spec breaks: which field, and what is wrong with it (without the field's name).
struct FieldError {
  FieldPath path;
  std::string message;
};

using MaybeFieldError = std::optional<FieldError>;

// Text for an error message: double-quoted, C-escaped, and cut to a readable length.
std::string Quoted(std::string_view text);

}  // namespace tessera::spec
