#pragma once
// FieldReader: typed fields read out of a YAML mapping of the training configuration
// (ParseTrainConfig), each error naming the source file, line and field path; strings have
// ${VAR}s expanded from the rank's environment.

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/engine/train/train_config.h"

namespace tessera::engine {

// Reads typed fields out of YAML mappings; every error names the source, line and field.
class FieldReader {
 public:
  FieldReader(std::string source, const std::map<std::string, std::string>& env)
      : source_(std::move(source)), env_(env) {}

  absl::Status Error(const YAML::Node& at, const std::string& path, const std::string& what) const {
    const int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(
        absl::StrCat(source_, line > 0 ? absl::StrCat(":", line) : "", ": ", path, ": ", what));
  }

  // Every key of `map` must be one of `known`.
  absl::Status OnlyKnown(const YAML::Node& map, const std::string& prefix,
                         const std::set<std::string>& known) const {
    if (!map.IsMap())
      return Error(map, prefix.empty() ? "(top level)" : prefix, "must be a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>("");
      if (!known.count(key)) {
        return Error(kv.first, prefix.empty() ? key : prefix + "." + key,
                     absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Read(const YAML::Node& map, const std::string& key, const std::string& prefix,
                    T* out) const {
    const YAML::Node node = map[key];
    if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();  // keep the default
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (!node.IsScalar()) return Error(node, path, "must be a single value");
    if constexpr (std::is_same_v<T, std::string>) {
      auto expanded = ExpandVariables(node.Scalar(), env_);
      if (!expanded.ok()) return Error(node, path, std::string(expanded.status().message()));
      *out = *expanded;
      return absl::OkStatus();
    } else if constexpr (std::is_same_v<T, bool>) {
      const std::string v = absl::AsciiStrToLower(node.Scalar());
      if (v == "true" || v == "yes" || v == "on")
        *out = true;
      else if (v == "false" || v == "no" || v == "off")
        *out = false;
      else
        return Error(node, path,
                     absl::StrCat("must be true or false, not \"", node.Scalar(), "\""));
      return absl::OkStatus();
    } else if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      if (!absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
        return Error(node, path, absl::StrCat("must be a number, not \"", node.Scalar(), "\""));
      }
      *out = v;
      return absl::OkStatus();
    } else {
      int64_t v = 0;
      if (!absl::SimpleAtoi(node.Scalar(), &v)) {
        return Error(node, path, absl::StrCat("must be an integer, not \"", node.Scalar(), "\""));
      }
      *out = static_cast<T>(v);
      return absl::OkStatus();
    }
  }

  absl::Status ReadDuration(const YAML::Node& map, const std::string& key, TrainDuration* out,
                            bool batches_only = false) const {
    const YAML::Node node = map[key];
    if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
    if (!node.IsScalar()) return Error(node, key, "must be a duration like 50ba or 2ep");
    auto d = ParseTrainDuration(node.Scalar());
    if (!d.ok()) return Error(node, key, std::string(d.status().message()));
    if (batches_only && d->unit != TrainDuration::Unit::kBatches) {
      return Error(node, key, "must be in batches (like 10ba)");
    }
    *out = *d;
    return absl::OkStatus();
  }

  absl::Status Positive(const YAML::Node& map, const std::string& key, const std::string& prefix,
                        double value, bool allow_zero) const {
    if (value > 0 || (allow_zero && value == 0)) return absl::OkStatus();
    const YAML::Node node = map[key];
    return Error(node.IsDefined() ? node : map, prefix.empty() ? key : prefix + "." + key,
                 allow_zero ? "must not be negative" : "must be positive");
  }

 private:
  std::string source_;
  const std::map<std::string, std::string>& env_;
};

}  // namespace tessera::engine
