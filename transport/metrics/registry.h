#pragma once
// Metric families: a name, HELP text and a fixed list of label names, with one child metric per
// distinct tuple of label values.
//
//   auto family = registry.AddCounter("tessera_runs_submitted_total", "Runs submitted.",
//   {"queue"}); if (!family.ok()) return family.status(); Counter& submitted =
//   (*family)->WithLabels({"default"});  // cache it: the reference is stable
//   submitted.Increment();
//
// Families and children live as long as their Registry, so references to them never dangle.
// Registering a family again with the same type, help, labels (and buckets) returns the existing
// one; anything else under that name is an error.

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "transport/metrics/metric.h"

namespace tessera::metrics {

// Orders tuples of label values; transparent, so a lookup by string_views allocates nothing.
struct LabelValuesLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      const int c = std::string_view(a[i]).compare(std::string_view(b[i]));
      if (c != 0) return c < 0;
    }
    return a.size() < b.size();
  }
};

// What every family has, whatever its metric type.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Histogram bucket upper bounds (empty for counters and gauges).
  const std::vector<double>& bucket_bounds() const { return *bounds_; }

  // A copy of every child, ordered by label values.
  virtual FamilySnapshot Snapshot() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names, std::vector<double> bounds);

  std::shared_ptr<const std::vector<double>> bounds_;

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

template <typename T>
class Family final : public FamilyBase {
 public:
  // The child for `label_values` (one per label name, in order), created on first use. Thread-safe;
  // a hit takes a shared lock and allocates nothing, but callers on a hot path should keep the
  // returned reference. A wrong number of values is a caller bug: it is logged (once) and a
  // detached child that is never exported is returned, so the caller cannot crash.
  T& WithLabels(absl::Span<const std::string_view> label_values = {});
  // As WithLabels, but a wrong number of values is an InvalidArgument error.
  absl::StatusOr<T*> TryWithLabels(absl::Span<const std::string_view> label_values);
  // Drops every series whose label values `keep` rejects, so that it is no longer exported: for
  // series whose subject is gone (a run that stopped running). A reference WithLabels returned
  // for a dropped series dangles: only for families whose callers keep none. Returns how many
  // were dropped.
  int RemoveUnless(const std::function<bool(const std::vector<std::string>&)>& keep);

  FamilySnapshot Snapshot() const override;

 private:
  friend class Registry;
  using FamilyBase::FamilyBase;

  std::unique_ptr<T> NewChild() const;
  T* FindOrCreate(absl::Span<const std::string_view> label_values);

  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>, LabelValuesLess> children_
      ABSL_GUARDED_BY(mu_);
  absl::once_flag detached_once_;
  std::unique_ptr<T> detached_;  // the sink for calls with the wrong number of label values
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry that the gRPC interceptor and the /metrics endpoint use by default.
  // Never destroyed, so it outlives every server and static.
  static Registry& Default();

  absl::StatusOr<Family<Counter>*> AddCounter(std::string_view name, std::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(std::string_view name, std::string_view help,
                                          std::vector<std::string> label_names = {});
  // `bucket_bounds`: finite and strictly increasing upper bounds; +Inf is implicit.
  absl::StatusOr<Family<Histogram>*> AddHistogram(std::string_view name, std::string_view help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> bucket_bounds);

  // Every family, sorted by name.
  std::vector<FamilySnapshot> Collect() const;

 private:
  absl::StatusOr<FamilyBase*> Add(std::string_view name, std::string_view help, MetricType type,
                                  std::vector<std::string> label_names, std::vector<double> bounds);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  // Each exposed series name (a histogram has three) to the family that owns it.
  std::map<std::string, std::string> series_owner_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::metrics
