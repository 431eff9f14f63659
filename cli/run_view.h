#pragma once
// How runs look to a person: the `get runs` table, the `describe run` page and the lines that
// `run submit --follow` prints.

#include <iosfwd>
#include <string>

#include "google/protobuf/repeated_field.h"
#include "proto/policy/run_status.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::cli {

// "120/1000 (12%)", "120" without a total, "-" before the first report.
std::string FormatProgress(const tessera::v1::RunProgress& progress);

// NAME USER CLUSTER GPUS STATUS RESUMPTION PROGRESS CREATED
void PrintRunTable(std::ostream& out,
                   const google::protobuf::RepeatedPtrField<tessera::v1::Run>& runs);

// Spec, compute, status, times, progress (a bar when `terminal_width` > 0: the output is a
// terminal that wide), attempts, interruptions and the event log.
void PrintRunDescription(std::ostream& out, const tessera::v1::RunDescription& description,
                         int terminal_width = 0);

// One line for a change seen while following a run: "TIME  STATUS  message".
std::string FormatRunChange(const tessera::v1::RunChange& change);

}  // namespace tessera::cli
