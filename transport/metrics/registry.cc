#include "transport/metrics/registry.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "transport/metrics/names.h"

namespace tessera::metrics {
namespace {

std::vector<std::string> SeriesNames(const std::string& name, MetricType type) {
  if (type == MetricType::kHistogram) {
    return {name + "_bucket", name + "_sum", name + "_count"};
  }
  return {name};
}

}  // namespace

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names, std::vector<double> bounds)
    : bounds_(std::make_shared<const std::vector<double>>(std::move(bounds))),
      name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

template <typename T>
std::unique_ptr<T> Family<T>::NewChild() const {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(bounds_);
  } else {
    return std::make_unique<T>();
  }
}

template <typename T>
T* Family<T>::FindOrCreate(absl::Span<const std::string_view> label_values) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = children_.find(label_values);
    if (it != children_.end()) return it->second.get();
  }
  absl::MutexLock lock(&mu_);
  auto it = children_.find(label_values);
  if (it == children_.end()) {
    std::vector<std::string> key(label_values.begin(), label_values.end());
    it = children_.emplace(std::move(key), NewChild()).first;
  }
  return it->second.get();
}

template <typename T>
absl::StatusOr<T*> Family<T>::TryWithLabels(absl::Span<const std::string_view> label_values) {
  if (label_values.size() != label_names().size()) {
    return absl::InvalidArgumentError(
        fmt::format("metric {} has {} label(s) ({}) but {} value(s) were given", name(),
                    label_names().size(), absl::StrJoin(label_names(), ","), label_values.size()));
  }
  return FindOrCreate(label_values);
}

template <typename T>
T& Family<T>::WithLabels(absl::Span<const std::string_view> label_values) {
  if (label_values.size() == label_names().size()) return *FindOrCreate(label_values);
  absl::call_once(detached_once_, [&] {
    spdlog::error("metrics: {} takes {} label value(s), got {}; the updates are dropped", name(),
                  label_names().size(), label_values.size());
    detached_ = NewChild();
  });
  return *detached_;
}

template <typename T>
int Family<T>::RemoveUnless(const std::function<bool(const std::vector<std::string>&)>& keep) {
  absl::MutexLock lock(&mu_);
  int removed = 0;
  for (auto it = children_.begin(); it != children_.end();) {
    if (keep(it->first)) {
      ++it;
    } else {
      it = children_.erase(it);
      ++removed;
    }
  }
  return removed;
}

template <typename T>
FamilySnapshot Family<T>::Snapshot() const {
  FamilySnapshot out;
  out.name = name();
  out.help = help();
  out.type = type();
  out.label_names = label_names();
  out.bucket_bounds = bucket_bounds();
  absl::ReaderMutexLock lock(&mu_);
  out.metrics.reserve(children_.size());
  for (const auto& [values, child] : children_) {
    MetricSnapshot& m = out.metrics.emplace_back();
    m.label_values = values;
    if constexpr (std::is_same_v<T, Histogram>) {
      child->SnapshotInto(m);
    } else {
      m.value = child->Value();
    }
  }
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry& Registry::Default() {
  static Registry* const registry = new Registry();
  return *registry;
}

absl::StatusOr<FamilyBase*> Registry::Add(std::string_view name, std::string_view help,
                                          MetricType type, std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  if (absl::Status s = ValidateMetricName(name); !s.ok()) return s;
  if (absl::Status s = ValidateLabelNames(name, label_names, type == MetricType::kHistogram);
      !s.ok()) {
    return s;
  }
  if (type == MetricType::kHistogram) {
    auto normalized = NormalizeBuckets(name, std::move(bounds));
    if (!normalized.ok()) return normalized.status();
    bounds = *std::move(normalized);
  }

  absl::MutexLock lock(&mu_);
  if (auto it = families_.find(name); it != families_.end()) {
    FamilyBase* existing = it->second.get();
    if (existing->type() != type || existing->help() != help ||
        existing->label_names() != label_names || existing->bucket_bounds() != bounds) {
      return absl::AlreadyExistsError(fmt::format(
          "metric {} is already registered as a {} with labels ({}) and a different help, type, "
          "labels or buckets",
          name, MetricTypeName(existing->type()), absl::StrJoin(existing->label_names(), ",")));
    }
    return existing;
  }
  const std::string key(name);
  const std::vector<std::string> series = SeriesNames(key, type);
  for (const std::string& s : series) {
    if (auto owner = series_owner_.find(s); owner != series_owner_.end()) {
      return absl::AlreadyExistsError(
          fmt::format("metric {} would expose series {}, which metric {} already exposes", name, s,
                      owner->second));
    }
  }

  std::unique_ptr<FamilyBase> family;
  switch (type) {
    case MetricType::kCounter:
      family.reset(new Family<Counter>(key, std::string(help), type, std::move(label_names),
                                       std::move(bounds)));
      break;
    case MetricType::kGauge:
      family.reset(new Family<Gauge>(key, std::string(help), type, std::move(label_names),
                                     std::move(bounds)));
      break;
    case MetricType::kHistogram:
      family.reset(new Family<Histogram>(key, std::string(help), type, std::move(label_names),
                                         std::move(bounds)));
      break;
  }
  for (const std::string& s : series) series_owner_.emplace(s, key);
  FamilyBase* raw = family.get();
  families_.emplace(key, std::move(family));
  return raw;
}

namespace {

// Casts the family Registry::Add returned (its type was checked there) and makes the single child
// of an unlabelled family exist, so that it is exported (as 0) before its first update.
template <typename T>
absl::StatusOr<Family<T>*> Typed(absl::StatusOr<FamilyBase*> base) {
  if (!base.ok()) return base.status();
  auto* family = static_cast<Family<T>*>(*base);
  if (family->label_names().empty()) family->WithLabels();
  return family;
}

}  // namespace

absl::StatusOr<Family<Counter>*> Registry::AddCounter(std::string_view name, std::string_view help,
                                                      std::vector<std::string> label_names) {
  return Typed<Counter>(Add(name, help, MetricType::kCounter, std::move(label_names), {}));
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names) {
  return Typed<Gauge>(Add(name, help, MetricType::kGauge, std::move(label_names), {}));
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(std::string_view name,
                                                          std::string_view help,
                                                          std::vector<std::string> label_names,
                                                          std::vector<double> bucket_bounds) {
  return Typed<Histogram>(
      Add(name, help, MetricType::kHistogram, std::move(label_names), std::move(bucket_bounds)));
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<const FamilyBase*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::vector<FamilySnapshot> out;
  out.reserve(families.size());
  for (const FamilyBase* family : families) out.push_back(family->Snapshot());
  return out;
}

}  // namespace tessera::metrics
