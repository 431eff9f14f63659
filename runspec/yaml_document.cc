#include "runspec/yaml_document.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runspec/absl_view.h"
#include "runspec/spec_limits.h"
#include "runspec/text_rules.h"
#include "runspec/yaml_scalar.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"

namespace tessera::spec {
namespace {

int OneBased(int zero_based) { return zero_based < 0 ? 1 : zero_based + 1; }

std::string_view NodeTypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "null";
  }
}

// Walks the whole document once, before anything reads it, so that the readers can rely on a
// bounded depth, unique scalar keys and valid text.
class ShapeCheck {
 public:
  absl::Status Check(const YAML::Node& node, int depth) {
    TESSERA_RETURN_IF_ERROR(Count(node));
    if (depth > kMaxNestingDepth) {
      return SpecError(node.Mark(), path_,
                       absl::StrCat("nesting is deeper than ", kMaxNestingDepth, " levels"));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return CheckScalar(node);
      case YAML::NodeType::Sequence:
        return CheckSequence(node, depth);
      case YAML::NodeType::Map:
        return CheckMapping(node, depth);
      default:
        return absl::OkStatus();
    }
  }

 private:
  // Counts a visit to a node, and its text, against the limits; aliases are counted each time
  // they are reached, so that an alias bomb fails here instead of exhausting memory later.
  absl::Status Count(const YAML::Node& node, bool is_key = false) {
    if (!is_key) ++visited_;
    if (node.IsScalar()) text_bytes_ += node.Scalar().size();
    if (visited_ > kMaxSpecNodes || text_bytes_ > kMaxExpandedTextBytes) {
      return SpecError(node.Mark(), path_,
                       absl::StrCat("the run spec is too large: more than ", kMaxSpecNodes,
                                    " values or ", kMaxExpandedTextBytes >> 20,
                                    " MiB of text (an alias counts each time it is used)"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckScalar(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    if (tag != kPlainTag && tag != kQuotedTag && tag != kStrTag) {
      return SpecError(node.Mark(), path_,
                       absl::StrCat("unsupported YAML tag ", Quoted(tag), " (only !!str is)"));
    }
    if (std::optional<std::string> problem = TextProblem(node.Scalar())) {
      return SpecError(node.Mark(), path_, *problem);
    }
    return absl::OkStatus();
  }

  absl::Status CheckCollectionTag(const YAML::Node& node, std::string_view standard_tag) {
    const std::string& tag = node.Tag();
    if (tag.empty() || tag == kPlainTag || tag == standard_tag) return absl::OkStatus();
    return SpecError(node.Mark(), path_, absl::StrCat("unsupported YAML tag ", Quoted(tag)));
  }

  absl::Status CheckSequence(const YAML::Node& node, int depth) {
    TESSERA_RETURN_IF_ERROR(CheckCollectionTag(node, kSeqTag));
    int index = 0;
    for (const auto& item : node) {
      path_.PushIndex(index++);
      TESSERA_RETURN_IF_ERROR(Check(item, depth + 1));
      path_.Pop();
    }
    return absl::OkStatus();
  }

  absl::Status CheckMapping(const YAML::Node& node, int depth) {
    TESSERA_RETURN_IF_ERROR(CheckCollectionTag(node, kMapTag));
    absl::flat_hash_map<std::string_view, YAML::Mark> seen;
    for (const auto& pair : node) {
      const YAML::Node& key = pair.first;
      if (!key.IsScalar()) {
        return SpecError(
            key.Mark(), path_,
            absl::StrCat("mapping keys must be strings, got ", AbslView(NodeTypeName(key))));
      }
      TESSERA_RETURN_IF_ERROR(Count(key, /*is_key=*/true));
      TESSERA_RETURN_IF_ERROR(CheckScalar(key));
      const std::string& name = key.Scalar();
      const auto [it, inserted] = seen.emplace(name, key.Mark());
      path_.Push(name);
      if (!inserted) {
        return SpecError(
            key.Mark(), path_,
            absl::StrCat("duplicate key (first defined at line ", OneBased(it->second.line), ")"));
      }
      TESSERA_RETURN_IF_ERROR(Check(pair.second, depth + 1));
      path_.Pop();
    }
    return absl::OkStatus();
  }

  FieldPath path_;
  int visited_ = 0;
  std::size_t text_bytes_ = 0;
};

// Listens to parser events only to learn where each document starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  const std::vector<YAML::Mark>& starts() const { return starts_; }

 private:
  std::vector<YAML::Mark> starts_;
};

absl::StatusOr<YAML::Node> LoadUnchecked(std::string_view text) {
  try {
    const std::string input(text);
    // First pass, events only: syntax errors anywhere, and more than one document. This calls
    // HandleNextDocument at most twice rather than using YAML::LoadAll, which loops forever on
    // some invalid inputs (a lone ","): yaml-cpp 0.7's HandleNextDocument can keep returning
    // true without consuming anything (fixed upstream in jbeder/yaml-cpp#1319).
    std::istringstream stream(input);
    YAML::Parser parser(stream);
    DocumentStarts documents;
    if (!parser.HandleNextDocument(documents)) {
      return SpecError(YAML::Mark(), "the run spec is empty");
    }
    if (parser.HandleNextDocument(documents)) {
      return SpecError(documents.starts().back(),
                       "a run spec is a single YAML document, but more content starts here");
    }
    // Second pass: the nodes of the one document.
    YAML::Node root = YAML::Load(input);
    if (root.IsNull()) return SpecError(YAML::Mark(), "the run spec is empty");
    return root;
  } catch (const YAML::DeepRecursion& e) {
    return SpecError(e.mark, absl::StrCat("nesting is deeper than ", kMaxNestingDepth, " levels"));
  } catch (const YAML::ParserException& e) {
    return SpecError(e.mark, absl::StrCat("YAML syntax error: ", e.msg));
  } catch (const YAML::Exception& e) {
    return SpecError(e.mark, absl::StrCat("YAML error: ", e.msg));
  } catch (const std::exception& e) {
    return SpecError(YAML::Mark(), absl::StrCat("YAML error: ", e.what()));
  }
}

// The (index)-th key/value pair of a mapping, if there is one.
bool NthPair(const YAML::Node& map, int index, YAML::Node* key, YAML::Node* value) {
  for (const auto& pair : map) {
    if (index-- == 0) {
      key->reset(pair.first);
      value->reset(pair.second);
      return true;
    }
  }
  return false;
}

// Follows `path` from element `i` on, starting at `node` (whose position is `mark`).
YAML::Mark Locate(const YAML::Node& node, const YAML::Mark& mark,
                  const std::vector<FieldPath::Element>& path, std::size_t i) {
  if (i == path.size()) return mark;
  const FieldPath::Element& element = path[i];
  YAML::Node key;
  YAML::Node value;
  if (node.IsMap() && element.is_index()) {
    // env_variables in mapping form: pair number `index`; ".key" is its key, ".value" its value.
    if (!NthPair(node, element.index, &key, &value)) return mark;
    if (i + 1 < path.size() && path[i + 1].key == "value") {
      return Locate(value, value.IsNull() ? key.Mark() : value.Mark(), path, i + 2);
    }
    return key.Mark();
  }
  if (node.IsMap()) {
    for (const auto& pair : node) {
      if (pair.first.Scalar() == element.key) {
        const YAML::Mark found = pair.second.IsNull() ? pair.first.Mark() : pair.second.Mark();
        return Locate(pair.second, found, path, i + 1);
      }
    }
    return mark;
  }
  if (node.IsSequence() && element.is_index()) {
    int index = element.index;
    for (const auto& item : node) {
      if (index-- == 0) return Locate(item, item.Mark(), path, i + 1);
    }
  }
  return mark;
}

}  // namespace

absl::Status SpecError(const YAML::Mark& mark, const FieldPath& path, std::string_view message) {
  if (path.empty()) return SpecError(mark, message);
  return absl::InvalidArgumentError(absl::StrFormat("line %d, column %d: %s: %s",
                                                    OneBased(mark.line), OneBased(mark.column),
                                                    path.ToString(), message));
}

absl::Status SpecError(const YAML::Mark& mark, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrFormat("line %d, column %d: %s", OneBased(mark.line),
                                                    OneBased(mark.column), message));
}

absl::StatusOr<YAML::Node> LoadSpecDocument(std::string_view text, std::size_t max_bytes) {
  if (text.size() > max_bytes) {
    return SpecError(YAML::Mark(), absl::StrCat("the run spec is ", text.size(),
                                                " bytes, more than the limit of ", max_bytes,
                                                " bytes (", max_bytes >> 20, " MiB)"));
  }
  TESSERA_ASSIGN_OR_RETURN(YAML::Node root, LoadUnchecked(text));
  try {
    if (!root.IsMap()) {
      return SpecError(root.Mark(),
                       absl::StrCat("the run spec must be a mapping of fields (name, image, "
                                    "command, compute, ...), got ",
                                    AbslView(NodeTypeName(root))));
    }
    ShapeCheck check;
    TESSERA_RETURN_IF_ERROR(check.Check(root, 1));
  } catch (const YAML::Exception& e) {
    return SpecError(e.mark, absl::StrCat("YAML error: ", e.msg));
  }
  return root;
}

YAML::Mark LocateField(const YAML::Node& root, const FieldPath& path) {
  try {
    return Locate(root, root.Mark(), path.elements(), 0);
  } catch (const YAML::Exception&) {
    return root.Mark();
  }
}

}  // namespace tessera::spec
