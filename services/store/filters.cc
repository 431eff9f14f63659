#include "services/store/filters.h"

#include <algorithm>

#include "services/store/log_store.h"

namespace tessera::store {

bool GlobMatches(std::string_view pattern, std::string_view text) {
  // Iterative matcher with single-star backtracking: linear in practice, never exponential.
  size_t p = 0, t = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = p++;
      star_t = t;
      continue;
    }
    if (p < pattern.size()) {
      char want = pattern[p];
      size_t width = 1;
      bool literal = false;
      if (want == '\\' && p + 1 < pattern.size()) {
        want = pattern[p + 1];
        width = 2;
        literal = true;
      }
      if ((!literal && want == '?') || want == text[t]) {
        p += width;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p + 1;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string GlobToSqlLike(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 4);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == '%' || next == '_' || next == '\\') out.push_back('\\');
      out.push_back(next);
    } else if (c == '*') {
      out.push_back('%');
    } else if (c == '?') {
      out.push_back('_');
    } else if (c == '%' || c == '_' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int64_t ToMicros(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * 1'000'000 + ts.nanos() / 1000;
}

void SummarizeRun(v1::Run* run) {
  v1::RunSpec* spec = run->mutable_spec();
  spec->clear_command();
  spec->clear_env_variables();
  spec->clear_parameters();
  spec->clear_metadata();
  for (auto& integration : *spec->mutable_integrations()) integration.clear_fields();
}

bool RunMatches(const v1::Run& run, const v1::RunFilter& filter) {
  if (filter.name_globs_size() > 0 &&
      std::none_of(filter.name_globs().begin(), filter.name_globs().end(),
                   [&](const std::string& g) { return GlobMatches(g, run.name()); })) {
    return false;
  }
  if (filter.statuses_size() > 0 && std::find(filter.statuses().begin(), filter.statuses().end(),
                                              run.status()) == filter.statuses().end()) {
    return false;
  }
  if (!filter.user().empty() && run.user() != filter.user()) return false;
  if (!filter.cluster().empty() && run.spec().compute().cluster() != filter.cluster()) return false;
  if (!filter.gpu_type().empty() && run.spec().compute().gpu_type() != filter.gpu_type()) {
    return false;
  }
  for (const auto& [key, value] : filter.metadata()) {
    const auto it = run.spec().metadata().find(key);
    if (it == run.spec().metadata().end() || it->second != value) return false;
  }
  const int64_t created = ToMicros(run.created_at());
  if (filter.has_created_before() && !(created < ToMicros(filter.created_before()))) return false;
  if (filter.has_created_after() && !(created > ToMicros(filter.created_after()))) return false;
  if (!filter.page_after_id().empty()) {
    // After the page's last run in the list's order: newest first, then id descending.
    const int64_t after = ToMicros(filter.page_after_created_at());
    if (!(created < after || (created == after && run.id() < filter.page_after_id()))) {
      return false;
    }
  }
  return true;
}

bool NodeMatches(const v1::Node& node, const v1::NodeFilter& filter) {
  if (!filter.cluster().empty() && node.cluster() != filter.cluster()) return false;
  if (!filter.gpu_type().empty() && node.gpu_type() != filter.gpu_type()) return false;
  if (filter.liveness_size() > 0 && std::find(filter.liveness().begin(), filter.liveness().end(),
                                              node.liveness()) == filter.liveness().end()) {
    return false;
  }
  if (filter.admin_states_size() > 0 &&
      std::find(filter.admin_states().begin(), filter.admin_states().end(), node.admin_state()) ==
          filter.admin_states().end()) {
    return false;
  }
  if (filter.names_size() > 0 && std::find(filter.names().begin(), filter.names().end(),
                                           node.name()) == filter.names().end()) {
    return false;
  }
  return true;
}

bool NodeEventMatches(const v1::NodeEvent& event, const v1::NodeEventFilter& filter) {
  if (event.id() <= filter.after_id()) return false;
  if (filter.node_names_size() > 0 &&
      std::find(filter.node_names().begin(), filter.node_names().end(), event.node_name()) ==
          filter.node_names().end()) {
    return false;
  }
  if (filter.types_size() > 0 && std::find(filter.types().begin(), filter.types().end(),
                                           event.type()) == filter.types().end()) {
    return false;
  }
  return true;
}

bool LogLineBefore(const v1::LogLine& a, const v1::LogLine& b) {
  const int64_t ta = ToMicros(a.time()), tb = ToMicros(b.time());
  if (ta != tb) return ta < tb;
  if (a.rank() != b.rank()) return a.rank() < b.rank();
  if (a.stream() != b.stream()) return a.stream() < b.stream();
  return a.sequence() < b.sequence();
}

}  // namespace tessera::store
