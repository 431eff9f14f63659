#include "runspec/integrations.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runspec/spec_limits.h"

namespace tessera::spec {
namespace {

using google::protobuf::Value;

const Value* Field(const tessera::v1::Integration& i, const char* name) {
  auto it = i.fields().fields().find(name);
  return it == i.fields().fields().end() ? nullptr : &it->second;
}

absl::Status Expect(const tessera::v1::Integration& i, int index, const char* name,
                    Value::KindCase kind, const char* what, bool required) {
  const Value* v = Field(i, name);
  const std::string path = absl::StrCat("integrations[", index, "].", name);
  if (v == nullptr || v->kind_case() == Value::kNullValue) {
    return required ? absl::InvalidArgumentError(absl::StrCat(path, ": required"))
                    : absl::OkStatus();
  }
  if (v->kind_case() != kind) return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  if (kind == Value::kStringValue &&
      (v->string_value().empty() || v->string_value().size() > 4096 ||
       v->string_value().find('\0') != std::string::npos)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a non-empty string, please"));
  }
  if (kind == Value::kListValue) {
    if (v->list_value().values_size() == 0 && required) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": at least one"));
    }
    for (int k = 0; k < v->list_value().values_size(); ++k) {
      const Value& item = v->list_value().values(k);
      if (item.kind_case() != Value::kStringValue || item.string_value().empty() ||
          item.string_value().size() > 4096) {
        return absl::InvalidArgumentError(absl::StrCat(path, "[", k, "]: a package name, please"));
      }
    }
  }
  return absl::OkStatus();
}

// The files of a local integration, packed by mcli when it submits the run.
absl::Status CheckLocalArchive(const tessera::v1::Integration& i, int n) {
  const std::string where = absl::StrCat("integrations[", n, "].archive");
  const Value* v = Field(i, "archive");
  if (v == nullptr || v->kind_case() != Value::kStringValue || v->string_value().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": required: the files at path (", IntegrationText(i, "path"),
        ") were not uploaded. `mcli run -f` packs them when it submits; over REST, give "
        "archive: the files as a gzip tar, base64"));
  }
  std::string archive;
  if (!absl::Base64Unescape(v->string_value(), &archive)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not base64"));
  }
  if (archive.size() > kMaxLocalArchiveBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", archive.size(), " bytes, more than the ", kMaxLocalArchiveBytes,
        " a local integration may carry: put large files in the image, a git_repo or the "
        "shared folder"));
  }
  // gzip's magic: a plain tar or anything else would only fail on the node.
  if (archive.size() < 18 || archive[0] != '\x1f' || archive[1] != '\x8b') {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a gzip file"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string IntegrationText(const tessera::v1::Integration& i, const char* name) {
  const Value* v = Field(i, name);
  return v != nullptr && v->kind_case() == Value::kStringValue ? v->string_value() : "";
}

bool IntegrationFlag(const tessera::v1::Integration& i, const char* name) {
  const Value* v = Field(i, name);
  return v != nullptr && v->kind_case() == Value::kBoolValue && v->bool_value();
}

std::vector<std::string> IntegrationPackages(const tessera::v1::Integration& i) {
  std::vector<std::string> out;
  if (const Value* v = Field(i, "packages"); v != nullptr && v->has_list_value()) {
    for (const auto& p : v->list_value().values()) out.push_back(p.string_value());
  }
  return out;
}

bool IsRunIntegration(std::string_view type) {
  return type == "git_repo" || type == "pip_packages" || type == "apt_packages" || type == "local";
}

absl::StatusOr<std::string> LocalTarget(const tessera::v1::Integration& i) {
  std::string target = IntegrationText(i, "target");
  if (target.empty()) {
    std::string path = IntegrationText(i, "path");
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    target = path.substr(path.find_last_of('/') + 1);
  }
  if (target.empty() || target == "." || target == "..") {
    return absl::InvalidArgumentError(
        "a folder to put the files in, please (path names none: give target)");
  }
  if (target.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", target, "\" is absolute: a path in the working folder, please"));
  }
  for (absl::string_view part : absl::StrSplit(target, '/')) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("\"", target, "\" leaves the working folder"));
    }
  }
  return target;
}

absl::Status ValidateIntegrations(const tessera::v1::RunSpec& spec) {
  for (int n = 0; n < spec.integrations_size(); ++n) {
    const auto& i = spec.integrations(n);
    const std::string& type = i.integration_type();
    absl::Status st;
    if (type == "git_repo") {
      struct Rule {
        const char* name;
        Value::KindCase kind;
        const char* what;
        bool required;
      };
      static constexpr Rule kGitRepo[] = {
          {"git_repo", Value::kStringValue, "a repository (org/repo or a URL)", true},
          {"git_branch", Value::kStringValue, "a branch name", false},
          {"git_commit", Value::kStringValue, "a commit", false},
          {"path", Value::kStringValue, "a folder", false},
          {"host", Value::kStringValue, "a git host (github.com)", false},
          {"pip_install", Value::kStringValue, "what to pip install (\".\" or \".[extra]\")",
           false},
          {"ssh_clone", Value::kBoolValue, "true or false", false},
          {"pr_number", Value::kNumberValue, "a pull request number", false}};
      for (const Rule& r : kGitRepo) st.Update(Expect(i, n, r.name, r.kind, r.what, r.required));
      const Value* pr = Field(i, "pr_number");
      if (st.ok() && pr != nullptr && pr->has_number_value() &&
          (pr->number_value() < 1 || pr->number_value() > 1e9 ||
           pr->number_value() != static_cast<double>(static_cast<int64_t>(pr->number_value())))) {
        st = absl::InvalidArgumentError(
            absl::StrCat("integrations[", n, "].pr_number: a positive whole number"));
      }
    } else if (type == "pip_packages") {
      st.Update(Expect(i, n, "packages", Value::kListValue, "a list of packages", true));
      st.Update(Expect(i, n, "upgrade", Value::kBoolValue, "true or false", false));
      st.Update(Expect(i, n, "install_index", Value::kStringValue, "an index URL", false));
    } else if (type == "apt_packages") {
      st.Update(Expect(i, n, "packages", Value::kListValue, "a list of packages", true));
    } else if (type == "local") {
      st.Update(Expect(i, n, "path", Value::kStringValue, "a file or folder", true));
      st.Update(Expect(i, n, "target", Value::kStringValue, "a path in the working folder", false));
      if (st.ok()) {
        if (auto target = LocalTarget(i); !target.ok()) {
          st = absl::InvalidArgumentError(
              absl::StrCat("integrations[", n, "].target: ", target.status().message()));
        }
      }
      if (st.ok()) st = CheckLocalArchive(i, n);
    }
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string DescribeIntegration(const tessera::v1::Integration& i) {
  const std::string& type = i.integration_type();
  if (type == "git_repo") {
    std::string at = IntegrationText(i, "git_commit");
    if (at.empty()) at = IntegrationText(i, "git_branch");
    return absl::StrCat("git_repo ", IntegrationText(i, "git_repo"), at.empty() ? "" : "@", at);
  }
  if (type == "local") return absl::StrCat("local ", IntegrationText(i, "path"));
  if (type == "pip_packages" || type == "apt_packages") {
    return absl::StrCat(type, " ", absl::StrJoin(IntegrationPackages(i), ", "));
  }
  return type;
}

std::vector<std::string> RecordedOnlyIntegrations(const tessera::v1::RunSpec& spec) {
  std::vector<std::string> out;
  for (const auto& i : spec.integrations()) {
    if (!IsRunIntegration(i.integration_type())) out.push_back(i.integration_type());
  }
  return out;
}

}  // namespace tessera::spec
