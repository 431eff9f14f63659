#include "cli/run_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include "base/timestamps.h"
#include "cli/names.h"
#include "cli/progress_view.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "runspec/run_spec_parser.h"

namespace tessera::cli {
namespace {

using tessera::v1::Run;
using tessera::v1::RunStatus;

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const std::string& part : parts) {
    if (!text.empty()) text += separator;
    text += part;
  }
  return text;
}

std::string ComputeSummary(const tessera::v1::ComputeSpec& compute) {
  std::string text = compute.gpus() > 0 ? std::to_string(compute.gpus()) + " GPUs" : "CPU only";
  if (!compute.gpu_type().empty()) text += " (" + compute.gpu_type() + ")";
  if (compute.nodes() > 0) text += " on " + std::to_string(compute.nodes()) + " nodes";
  if (!compute.cluster().empty()) text += ", cluster " + compute.cluster();
  if (compute.node_names_size() > 0) {
    text += ", nodes " + Join({compute.node_names().begin(), compute.node_names().end()}, ",");
  }
  return text;
}

std::string SchedulingSummary(const tessera::v1::SchedulingSpec& scheduling) {
  std::string text = "priority " + ShortName(scheduling.priority());
  text += scheduling.preemptible() ? ", preemptible" : ", not preemptible";
  if (scheduling.has_retry_on_system_failure()) {
    text += scheduling.retry_on_system_failure() ? ", retries on system failure"
                                                 : ", no retry on system failure";
  }
  if (scheduling.has_max_retries())
    text += ", max " + std::to_string(scheduling.max_retries()) + " retries";
  if (scheduling.max_duration_hours() > 0) {
    text += ", max duration " + FormatSeconds(scheduling.max_duration_hours() * 3600);
  }
  return text;
}

std::string AttemptNodes(const tessera::v1::Attempt& attempt) {
  std::vector<std::string> names;
  for (const auto& node : attempt.nodes()) names.push_back(node.node_name());
  return OrDash(Join(names, ","));
}

std::string AttemptReason(const tessera::v1::Attempt& attempt) {
  std::vector<std::string> parts;
  if (attempt.end_reason() != tessera::v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    parts.push_back(ShortName(attempt.end_reason()));
  }
  if (!attempt.reason().empty()) parts.push_back(attempt.reason());
  if (!attempt.first_failed_node().empty() && attempt.first_failed_rank() >= 0) {
    parts.push_back("first failure: rank " + std::to_string(attempt.first_failed_rank()) + " on " +
                    attempt.first_failed_node());
  }
  return OrDash(Join(parts, ": "));
}

// An interruption's parts, where it has them ("notice 15s, wait 5s, restart 10s, redo 50s
// (50 steps)").
std::string LostParts(const tessera::v1::Interruption& item) {
  std::vector<std::string> parts;
  const auto add = [&](const char* what, double seconds) {
    if (seconds > 0) parts.push_back(std::string(what) + " " + FormatSeconds(seconds));
  };
  add("notice", item.detection_seconds());
  add("wait", item.downtime_seconds());
  add("restart", item.restart_seconds());
  add("redo", item.rework_seconds());
  if (item.rework_steps() > 0 && !parts.empty() && item.rework_seconds() > 0) {
    parts.back() += " (" + std::to_string(item.rework_steps()) + " steps)";
  }
  return OrDash(Join(parts, ", "));
}

// "every 25 steps (12s), 0.4s a save; advised: every 3000 steps (25m), ..." with what the
// advice is based on.
std::string CheckpointAdviceText(const tessera::v1::CheckpointAdvice& a) {
  char save[32];
  std::snprintf(save, sizeof(save), "%.2gs", a.save_seconds());
  const std::string save_text = a.save_seconds() >= 10 ? FormatSeconds(a.save_seconds()) : save;
  const std::string seen = a.rate_is_bound()
                               ? std::string("no hardware interruption (taken as one)")
                               : std::to_string(a.interruptions()) + " hardware interruption(s)";
  return "every " + std::to_string(a.interval_steps()) + " steps (" +
         FormatSeconds(a.interval_seconds()) + "), " + save_text + " a save; advised: every " +
         std::to_string(a.advised_interval_steps()) + " steps (" +
         FormatSeconds(a.advised_interval_seconds()) + "), expected loss " +
         FormatPercent(a.expected_loss_advised()) + " instead of " +
         FormatPercent(a.expected_loss_now()) + ", from " + seen + " in " +
         std::to_string(std::llround(a.gpu_hours())) + " GPU-hours over " +
         std::to_string(std::llround(a.window_days())) + " days (one per " +
         FormatSeconds(a.mean_seconds_between_interruptions()) + " for this run's GPUs)";
}

// The map's entries, largest value first.
std::vector<std::pair<std::string, double>> SortedByValue(
    const google::protobuf::Map<std::string, double>& map) {
  std::vector<std::pair<std::string, double>> sorted(map.begin(), map.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

void PrintIndented(std::ostream& out, const std::string& text, const std::string& indent) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) out << (line.empty() ? "" : indent) << line << "\n";
}

}  // namespace

std::string FormatProgress(const tessera::v1::RunProgress& progress) {
  if (progress.total_steps() > 0) {
    const double fraction = static_cast<double>(progress.step()) / progress.total_steps();
    return std::to_string(progress.step()) + "/" + std::to_string(progress.total_steps()) + " (" +
           std::to_string(static_cast<int>(std::floor(fraction * 100))) + "%)";
  }
  if (progress.step() > 0) return std::to_string(progress.step());
  return "-";
}

void PrintRunTable(std::ostream& out, const google::protobuf::RepeatedPtrField<Run>& runs) {
  Table table({"NAME", "USER", "CLUSTER", "GPUS", "STATUS", "RESUMPTION", "PROGRESS", "CREATED"});
  for (const Run& run : runs) {
    std::string status = ShortName(run.status());
    if (run.stop_requested() && !IsTerminal(run.status())) status += " (stopping)";
    table.AddRow({run.name(), OrDash(run.user()), OrDash(run.spec().compute().cluster()),
                  std::to_string(run.spec().compute().gpus()), status,
                  run.resumption_index() < 0 ? "-" : std::to_string(run.resumption_index()),
                  FormatProgress(run.progress()), FormatTimestamp(run.created_at())});
  }
  table.Print(out);
}

void PrintRunDescription(std::ostream& out, const tessera::v1::RunDescription& description,
                         int terminal_width) {
  const Run& run = description.run();
  Fields fields;
  fields.Add("Run", run.name());
  fields.Add("ID", OrDash(run.id()));
  fields.Add("User", OrDash(run.user()));
  std::string status = ShortName(run.status());
  if (run.stop_requested() && !IsTerminal(run.status())) status += " (stop requested)";
  if (!run.status_reason().empty()) status += ": " + run.status_reason();
  fields.Add("Status", status);
  fields.Add("Image", OrDash(run.spec().image()));
  fields.Add("Compute", ComputeSummary(run.spec().compute()));
  fields.Add("Scheduling", SchedulingSummary(run.spec().scheduling()));
  fields.Add("Created", FormatTimestamp(run.created_at()));
  fields.Add("Started", FormatTimestamp(run.started_at()));
  fields.Add("Ended", FormatTimestamp(run.ended_at()));
  fields.Add("Resumption",
             run.resumption_index() < 0 ? "-" : std::to_string(run.resumption_index()));
  fields.Add("Retries used", std::to_string(run.retries_used()));
  fields.Add("Pending time", FormatSeconds(run.pending_seconds()));
  fields.Add("Running time", FormatSeconds(run.running_seconds()));
  fields.Add("Training time", run.effective_training_seconds() > 0
                                  ? FormatSeconds(run.effective_training_seconds()) +
                                        " effective, " + FormatPercent(description.goodput()) +
                                        " goodput"
                                  : "-");
  if (description.has_cluster_goodput()) {
    fields.Add("Cluster goodput", FormatPercent(description.cluster_goodput()) +
                                      " (the running runs', weighted by their GPUs)");
  }
  if (description.has_checkpoint_advice()) {
    fields.Add("Checkpoints", CheckpointAdviceText(description.checkpoint_advice()));
  }
  const tessera::v1::RunProgress& progress = run.progress();
  std::string progress_text = FormatProgress(progress);
  if (progress.step() > 0 || progress.total_steps() > 0) {
    // The time left at the current attempt's pace since it started.
    std::optional<absl::Duration> remaining;
    for (const auto& attempt : description.attempts()) {
      if (attempt.resumption_index() == run.resumption_index() && attempt.has_started_at() &&
          run.status() == tessera::v1::RUN_STATUS_RUNNING) {
        remaining = EstimateRemaining(
            progress, {attempt.resumed_from_step(), FromProtoTime(attempt.started_at())});
      }
    }
    progress_text = terminal_width > 0 ? FormatProgressBar(progress, remaining, terminal_width - 18)
                                       : FormatProgressLine(progress, remaining);
    if (IsSet(progress.reported_at())) {
      progress_text += " (at " + FormatTimestamp(progress.reported_at()) + ")";
    }
  }
  fields.Add("Progress", progress_text);
  if (progress.loss_rollbacks() > 0) {
    const auto& last = progress.last_loss_rollback();
    fields.Add("Loss rollbacks",
               std::to_string(progress.loss_rollbacks()) +
                   (last.number() > 0 ? ", the last at step " + std::to_string(last.bad_step()) +
                                            " (" + last.reason() + ")"
                                      : ""));
  }
  fields.Print(out);

  out << "\nAttempts:\n";
  if (description.attempts().empty()) {
    out << "  (none yet)\n";
  } else {
    Table attempts({"RESUMPTION", "STATUS", "STARTED", "ENDED", "NODES", "STEPS", "REASON"}, 0);
    attempts.SetMaxWidth(4, 60);
    for (const auto& attempt : description.attempts()) {
      attempts.AddRow(
          {std::to_string(attempt.resumption_index()), ShortName(attempt.status()),
           FormatTimestamp(attempt.started_at()), FormatTimestamp(attempt.ended_at()),
           AttemptNodes(attempt),
           std::to_string(attempt.resumed_from_step()) + "-" + std::to_string(attempt.last_step()),
           AttemptReason(attempt)});
    }
    attempts.Print(out, "  ");
  }

  if (!description.interruptions().empty()) {
    out << "\nInterruptions:\n";
    Table interruptions(
        {"RESUMPTION", "TIME", "CAUSE", "DETECTED BY", "LOST", "OF WHICH", "DETAIL"}, 0);
    for (const auto& item : description.interruptions()) {
      interruptions.AddRow({std::to_string(item.resumption_index()), FormatTimestamp(item.time()),
                            ShortName(item.cause()), ShortName(item.detection_method()),
                            FormatSeconds(item.seconds_lost()) + (item.ongoing() ? "+" : ""),
                            LostParts(item), OrDash(item.detail())});
    }
    interruptions.Print(out, "  ");
    std::string by_cause;
    for (const auto& [cause, seconds] : SortedByValue(description.seconds_lost_by_cause())) {
      by_cause += (by_cause.empty() ? "" : ", ") + cause + " " + FormatSeconds(seconds);
    }
    out << "  Lost by cause: " << by_cause << "\n";
  }

  out << "\nEvents:\n";
  if (description.events().empty()) {
    out << "  (none)\n";
  } else {
    Table events({"TIME", "RESUMPTION", "EVENT", "MESSAGE"}, 0);
    for (const auto& event : description.events()) {
      events.AddRow({FormatTimestamp(event.time()), std::to_string(event.resumption_index()),
                     ShortName(event.type()), event.message()});
    }
    events.Print(out, "  ");
  }

  out << "\nRun spec:\n";
  PrintIndented(out, tessera::spec::RunSpecToYaml(run.spec()), "  ");
}

std::string FormatRunChange(const tessera::v1::RunChange& change) {
  const bool has_event = change.has_event() && change.event().type() != 0;
  const auto& time = has_event                          ? change.event().time()
                     : IsSet(change.run().updated_at()) ? change.run().updated_at()
                                                        : change.run().created_at();
  std::string line = FormatTimestamp(time) + "  " + PadRight(ShortName(change.run().status()), 13);
  if (has_event) {
    line += change.event().message().empty() ? ShortName(change.event().type())
                                             : change.event().message();
  } else if (!change.run().status_reason().empty()) {
    line += change.run().status_reason();
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return InertText(line);
}

}  // namespace tessera::cli
