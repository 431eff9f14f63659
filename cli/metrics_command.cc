// mcli get metrics RUN: a run's progress history (the points its charts draw) as a table, JSON,
// YAML or CSV, with where each attempt resumed and why the one before it ended.

#include <charconv>
#include <memory>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "base/timestamps.h"
#include "cli/commands.h"
#include "cli/names.h"
#include "cli/progress_view.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/run_metrics.grpc.pb.h"

namespace tessera::cli {
namespace {

struct GetMetricsOptions {
  std::string run;
  int resumption = -1;
};

// The shortest text that reads back as the same double ("nan", "inf" as they are).
std::string Exact(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, result.ptr);
}

// RFC 3339 in UTC to the microsecond, as stored.
std::string CsvTime(const google::protobuf::Timestamp& time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", FromProtoTime(time), absl::UTCTimeZone());
}

void PrintCsv(std::ostream& out, const tessera::v1::GetRunMetricsResponse& response) {
  out << "resumption_index,step,time,loss,learning_rate,tokens_per_second,mfu\n";
  for (const auto& p : response.points()) {
    out << p.resumption_index() << ',' << p.step() << ',' << CsvTime(p.time()) << ','
        << Exact(p.loss()) << ',' << Exact(p.learning_rate()) << ',' << Exact(p.tokens_per_second())
        << ',' << Exact(p.mfu()) << '\n';
  }
}

// "attempt 1 resumed from step 1200 at TIME; attempt 0 ended: NODE_FAILURE (node n3 lost)".
std::string Resumption(const tessera::v1::Attempt& previous, const tessera::v1::Attempt& next) {
  std::string text = "attempt " + std::to_string(next.resumption_index()) + " resumed from step " +
                     std::to_string(next.resumed_from_step());
  if (next.has_started_at()) text += " at " + FormatTimestamp(next.started_at());
  text += "; attempt " + std::to_string(previous.resumption_index()) + " ended";
  if (previous.end_reason() != tessera::v1::ATTEMPT_END_REASON_UNSPECIFIED) {
    text += ": " + ShortName(previous.end_reason());
  }
  if (!previous.reason().empty()) text += " (" + previous.reason() + ")";
  return text;
}

void PrintTable(std::ostream& out, const tessera::v1::GetRunMetricsResponse& response) {
  if (response.points().empty()) {
    out << "No progress reported for run " << response.run_name() << " yet\n";
  } else {
    Table table({"ATTEMPT", "STEP", "TIME", "LOSS", "LR", "TOKENS/S", "MFU"});
    for (const auto& p : response.points()) {
      table.AddRow({std::to_string(p.resumption_index()), std::to_string(p.step()),
                    FormatTimestamp(p.time()), FormatFixed(p.loss(), 4), Exact(p.learning_rate()),
                    FormatFixed(p.tokens_per_second(), 0), FormatPercent(p.mfu())});
    }
    table.Print(out);
  }
  for (int i = 1; i < response.attempts_size(); ++i) {
    out << Resumption(response.attempts(i - 1), response.attempts(i)) << "\n";
  }
}

int GetMetrics(CommandContext& context, const GetMetricsOptions& options) {
  tessera::v1::GetRunMetricsRequest request;
  request.set_name(options.run);
  if (options.resumption >= 0) request.set_resumption_index(options.resumption);
  Connection& connection = context.connection();
  auto stub = tessera::v1::RunMetricsService::NewStub(connection.channel());
  tessera::v1::GetRunMetricsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->GetRunMetrics(c, request, &response); });
  switch (context.format()) {
    case OutputFormat::kCsv:
      PrintCsv(context.out(), response);
      break;
    case OutputFormat::kTable:
      PrintTable(context.out(), response);
      break;
    case OutputFormat::kJson:
    case OutputFormat::kYaml:
      PrintDocument(context.out(), context.format(), MessageToJson(response));
      break;
  }
  return kExitOk;
}

}  // namespace

void AddGetMetricsCommand(CLI::App* get, ActionSlot& slot) {
  auto options = std::make_shared<GetMetricsOptions>();
  CLI::App* metrics = get->add_subcommand(
      "metrics",
      "A run's progress history: step, loss, learning rate, tokens/s and MFU over time "
      "(-o csv for a spreadsheet or a plot)");
  metrics->add_option("RUN", options->run, "The run's name")->required();
  metrics->add_option("--resumption", options->resumption, "Only this attempt (0 is the first)")
      ->check(CLI::Range(0, 1000000));
  OnParsed(metrics, slot,
           [options](CommandContext& context) { return GetMetrics(context, *options); });
}

}  // namespace tessera::cli
