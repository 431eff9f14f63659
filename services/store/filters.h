#pragma once
// Filter semantics shared by the store implementations, so that memory and PostgreSQL agree
// (the conformance suite holds them to it).

#include <string>
#include <string_view>

#include "tessera/v1/cordon.pb.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::store {

// Shell-style glob: `*` any run of characters, `?` one character, `\x` a literal x.
bool GlobMatches(std::string_view pattern, std::string_view text);
// The same glob as a SQL LIKE pattern with `\` as its escape character.
std::string GlobToSqlLike(std::string_view pattern);

// Microseconds since the epoch: the precision PostgreSQL keeps, used to compare times.
int64_t ToMicros(const google::protobuf::Timestamp& ts);

bool RunMatches(const v1::Run& run, const v1::RunFilter& filter);

// What a list carries of a run (RunStore::ListRuns): everything but the parts of its spec a user
// may make large and a list needs none of (command, env variables, parameters, metadata, and
// the fields of its integrations; their types stay). A reply of a thousand runs stays small
// whatever the runs' owners wrote; GetRun gives the whole run.
void SummarizeRun(v1::Run* run);
bool NodeMatches(const v1::Node& node, const v1::NodeFilter& filter);
bool NodeEventMatches(const v1::NodeEvent& event, const v1::NodeEventFilter& filter);

}  // namespace tessera::store
