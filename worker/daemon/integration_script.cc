#include "worker/daemon/integration_script.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runspec/integrations.h"

namespace tessera::worker {
namespace {

using google::protobuf::Value;

std::string Text(const v1::Integration& i, const char* name) {
  return spec::IntegrationText(i, name);
}

std::string Packages(const v1::Integration& i) {
  std::string out;
  for (const auto& p : spec::IntegrationPackages(i)) absl::StrAppend(&out, " ", ShellQuote(p));
  return out;
}

// Where git_repo clones from: a URL or path as given, else org/repo on the host (GitHub).
std::string CloneUrl(const v1::Integration& i) {
  const std::string repo = Text(i, "git_repo");
  if (absl::StrContains(repo, "://") || absl::StartsWith(repo, "/") ||
      absl::StartsWith(repo, "git@")) {
    return repo;
  }
  const std::string host = Text(i, "host").empty() ? "github.com" : Text(i, "host");
  return spec::IntegrationFlag(i, "ssh_clone") ? absl::StrCat("git@", host, ":", repo, ".git")
                                               : absl::StrCat("https://", host, "/", repo, ".git");
}

// git clones to the repository's name in the work folder unless `path` says otherwise.
std::string ClonePath(const v1::Integration& i) {
  if (!Text(i, "path").empty()) return Text(i, "path");
  std::string name = Text(i, "git_repo");
  while (absl::EndsWith(name, "/")) name.pop_back();
  name = name.substr(name.find_last_of("/:") + 1);
  if (absl::EndsWith(name, ".git")) name.resize(name.size() - 4);
  return name.empty() ? "repo" : name;
}

constexpr char kPython[] =
    "PY=$(command -v python3 || command -v python) || { echo 'no python in the image' >&2; "
    "exit 127; }\n"
    // In a virtual environment or as root, the environment's own site; else the user's.
    "if [ -n \"${VIRTUAL_ENV:-}\" ] || [ \"$(id -u)\" = 0 ]; then PIP_USER_FLAG=; else "
    "PIP_USER_FLAG=--user; fi\n";

std::string Body(const v1::Integration& i, int index) {
  const std::string& type = i.integration_type();
  if (type == "local") {
    // Entries are relative to the working folder (mcli put target in front of each); tar runs
    // as the rank's user in its sandbox, so it writes only where the rank may.
    const auto target = spec::LocalTarget(i);
    const std::string archive = ShellQuote(LocalArchiveName(index));
    return absl::StrCat("tar -xzf ", archive, "\nrm -f ", archive, "\necho \"[tessera] unpacked \"",
                        ShellQuote(Text(i, "path")), "\" into $(pwd)/\"",
                        ShellQuote(target.ok() ? *target : "?"), "\n");
  }
  if (type == "git_repo") {
    const std::string path = ShellQuote(ClonePath(i));
    std::string s =
        absl::StrCat("export GIT_TERMINAL_PROMPT=0\ngit clone",
                     Text(i, "git_branch").empty()
                         ? ""
                         : absl::StrCat(" --branch ", ShellQuote(Text(i, "git_branch"))),
                     " -- ", ShellQuote(CloneUrl(i)), " ", path, "\ncd ", path, "\n");
    auto pr = i.fields().fields().find("pr_number");
    if (pr != i.fields().fields().end() && pr->second.has_number_value()) {
      const int64_t n = static_cast<int64_t>(pr->second.number_value());
      absl::StrAppend(&s, "git fetch origin pull/", n, "/head:tessera-pr-", n,
                      "\ngit checkout tessera-pr-", n, "\n");
    }
    if (!Text(i, "git_commit").empty()) {
      absl::StrAppend(&s, "git checkout ", ShellQuote(Text(i, "git_commit")), "\n");
    }
    absl::StrAppend(&s, "echo \"[tessera] $(pwd) is at $(git rev-parse HEAD)\"\n");
    if (!Text(i, "pip_install").empty()) {
      absl::StrAppend(&s, kPython, "\"$PY\" -m pip install --no-input $PIP_USER_FLAG ",
                      ShellQuote(Text(i, "pip_install")), "\n");
    }
    return s;
  }
  if (type == "pip_packages") {
    return absl::StrCat(kPython, "\"$PY\" -m pip install --no-input $PIP_USER_FLAG",
                        spec::IntegrationFlag(i, "upgrade") ? " --upgrade" : "",
                        Text(i, "install_index").empty()
                            ? ""
                            : absl::StrCat(" --index-url ", ShellQuote(Text(i, "install_index"))),
                        Packages(i), "\n");
  }
  if (type == "apt_packages") {
    return absl::StrCat(
        "[ \"$(id -u)\" = 0 ] || { echo 'apt_packages needs root, and ranks run as their "
        "user in the sandbox: install these packages in the image' >&2; exit 1; }\n"
        "apt-get update -qq\nDEBIAN_FRONTEND=noninteractive apt-get install -y -qq",
        Packages(i), "\n");
  }
  return "";
}

}  // namespace

std::string LocalArchiveName(int index) {
  return absl::StrCat(".tessera-local-", index, ".tar.gz");
}

std::string ShellQuote(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

bool HasRunIntegrations(const google::protobuf::RepeatedPtrField<v1::Integration>& integrations) {
  for (const auto& i : integrations) {
    if (spec::IsRunIntegration(i.integration_type())) return true;
  }
  return false;
}

std::string IntegrationScript(
    const google::protobuf::RepeatedPtrField<v1::Integration>& integrations) {
  std::string script;
  for (int n = 0; n < integrations.size(); ++n) {
    const v1::Integration& i = integrations[n];
    if (!spec::IsRunIntegration(i.integration_type())) continue;
    const std::string what = ShellQuote(spec::DescribeIntegration(i));
    // Each in a shell of its own with -e, which stops it at its first failing command (a
    // subshell would not: -e is ignored on the left of `||`), and keeps its `cd` to itself.
    absl::StrAppend(&script, "echo \"[tessera] integration ", n, ": \"", what, "\n/bin/sh -ec ",
                    ShellQuote(Body(i, n)), " || { rc=$?; echo \"[tessera] integration ", n, " (\"",
                    what, "\") failed with exit code $rc\" >&2; exit ", kFirstIntegrationExit + n,
                    "; }\n");
  }
  return script;
}

}  // namespace tessera::worker
