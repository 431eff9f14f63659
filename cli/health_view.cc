#include "cli/health_view.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/names.h"
#include "cli/table.h"
#include "cli/time_format.h"

namespace tessera::cli {

std::string HealthFigures(const tessera::v1::HealthCheckResult& r) {
  if (r.kind() == tessera::v1::HEALTH_CHECK_KIND_COMPUTE_STRESS && r.compute_tflops() > 0) {
    return absl::StrFormat("compute %.3g TFLOP/s", r.compute_tflops());
  }
  if (r.samples_size() > 0) {
    const auto& s = r.samples(r.samples_size() - 1);
    return absl::StrFormat("busbw %.3g GB/s at %.0f MiB", s.busbw_gbps(),
                           static_cast<double>(s.payload_bytes()) / (1 << 20));
  }
  return "-";
}

void PrintHealthResults(
    std::ostream& out,
    const google::protobuf::RepeatedPtrField<tessera::v1::HealthCheckResult>& results,
    const char* indent) {
  if (results.empty()) {
    out << indent << "(none)\n";
    return;
  }
  Table table({"TIME", "NODE", "CHECK", "GROUP", "VERDICT", "FIGURES", "SWEEP", "DETAIL"}, 0);
  table.SetMaxWidth(7, 70);
  for (const auto& r : results) {
    table.AddRow({FormatTimestamp(r.finished_at()), r.node_name(), ShortName(r.kind()),
                  r.group_size() > 1 ? absl::StrJoin(r.group(), "+") : "-", ShortName(r.verdict()),
                  HealthFigures(r), r.sweep_id().empty() ? "-" : r.sweep_id(),
                  r.error().empty() ? "-" : r.error()});
  }
  table.Print(out, indent);
}

void PrintSweeps(std::ostream& out,
                 const google::protobuf::RepeatedPtrField<tessera::v1::Sweep>& sweeps) {
  Table table({"ID", "TRIGGER", "STATE", "NODES", "ANOMALOUS", "RUN", "CREATED", "FINISHED"});
  for (const auto& s : sweeps) {
    table.AddRow({s.id(), ShortName(s.trigger()), ShortName(s.state()),
                  std::to_string(s.node_names_size()),
                  s.anomalous_nodes().empty() ? "-" : absl::StrJoin(s.anomalous_nodes(), ","),
                  s.run_name().empty() ? "-" : s.run_name(), FormatTimestamp(s.created_at()),
                  FormatTimestamp(s.finished_at())});
  }
  table.Print(out);
}

void PrintSweep(std::ostream& out, const tessera::v1::GetSweepResponse& response) {
  const auto& s = response.sweep();
  Fields fields;
  fields.Add("Sweep", s.id());
  fields.Add("Trigger", ShortName(s.trigger()));
  fields.Add("State", ShortName(s.state()));
  fields.Add("Nodes", absl::StrJoin(s.node_names(), ", "));
  fields.Add("Requested by", s.requested_by().empty() ? "-" : s.requested_by());
  fields.Add("Run", s.run_name().empty() ? "-" : s.run_name());
  fields.Add("Created", FormatTimestamp(s.created_at()));
  fields.Add("Finished", FormatTimestamp(s.finished_at()));
  fields.Add("Anomalous",
             s.anomalous_nodes().empty() ? "-" : absl::StrJoin(s.anomalous_nodes(), ", "));
  fields.Add("Inconclusive",
             s.inconclusive_nodes().empty() ? "-" : absl::StrJoin(s.inconclusive_nodes(), ", "));
  // Slow on this sweep's evidence alone: a follow-up (or the next sweep) measures them again.
  if (!s.repeat_nodes().empty()) fields.Add("Found slow", absl::StrJoin(s.repeat_nodes(), ", "));
  if (!s.follows_sweep_id().empty()) fields.Add("Follows", s.follows_sweep_id());
  fields.Print(out);
  if (!s.findings().empty()) {
    out << "\nFindings:\n";
    for (const auto& f : s.findings()) out << "  " << f << "\n";
  }
  for (const auto& f : s.fabric_faults()) {
    // A switch (or rack) at fault: its nodes were cordoned together and return together.
    out << "\nFabric fault, " << f.label() << " " << f.value() << " ("
        << absl::StrJoin(f.nodes(), ", ") << "):\n";
    for (const auto& pair : f.pairs()) out << "  " << pair << "\n";
  }
  if (!s.suspects().empty()) {
    // Nodes that looked slow and were measured again until the sequential test decided.
    out << "\nSuspects measured again:\n";
    for (const auto& line : s.suspects()) out << "  " << line << "\n";
  }
  out << "\nResults:\n";
  PrintHealthResults(out, response.results(), "  ");
}

}  // namespace tessera::cli
