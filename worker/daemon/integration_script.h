#pragma once
// The shell script that runs a run's integrations (runspec/integrations.h) on a node, once per
// attempt, in the sandbox of the node's first rank and in its work folder, before any rank
// starts. What it prints goes to that rank's log. The first integration that fails ends it
// with exit code kFirstIntegrationExit + its index, which names it in the attempt's failure.

#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "tessera/v1/run_spec.pb.h"

namespace tessera::worker {

inline constexpr int kFirstIntegrationExit = 100;

// Whether any of them is one Tessera runs (the others are only recorded).
bool HasRunIntegrations(const google::protobuf::RepeatedPtrField<v1::Integration>& integrations);

std::string IntegrationScript(
    const google::protobuf::RepeatedPtrField<v1::Integration>& integrations);

// The file, in the working folder, that holds integration `index`'s files (a `local`
// integration) while the script unpacks them; the worker writes it before the script runs.
std::string LocalArchiveName(int index);

// Single-quoted for the shell: any text, safely one word.
std::string ShellQuote(const std::string& text);

}  // namespace tessera::worker
