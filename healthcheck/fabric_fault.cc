#include "healthcheck/fabric_fault.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::health {
namespace {

std::string LabelOf(const std::map<std::string, v1::Node>& known, const std::string& node,
                    const std::string& key) {
  const auto it = known.find(node);
  if (it == known.end()) return "";
  const auto label = it->second.labels().find(key);
  return label == it->second.labels().end() ? "" : label->second;
}

// Nodes a finding names before it counts the rest.
constexpr size_t kNodesNamed = 16;

bool Touches(const std::vector<std::string>& group, const std::set<std::string>& domain) {
  return std::any_of(group.begin(), group.end(),
                     [&](const std::string& m) { return domain.count(m) > 0; });
}

// The domains of one label whose every pair is bad and none of whose nodes an earlier stage
// condemned, by value (each with at least two of the sweep's nodes).
std::map<std::string, std::set<std::string>> Candidates(
    const std::string& key, const std::vector<std::string>& nodes,
    const std::vector<std::vector<std::string>>& groups, const std::vector<GroupJudgement>& judged,
    const std::map<std::string, v1::Node>& known, const std::set<std::string>& excluded) {
  std::map<std::string, std::set<std::string>> domains;
  for (const auto& n : nodes) {
    if (excluded.count(n)) continue;
    if (const std::string value = LabelOf(known, n, key); !value.empty()) domains[value].insert(n);
  }
  std::map<std::string, std::set<std::string>> out;
  for (auto& [value, members] : domains) {
    if (members.size() < 2) continue;
    // Every sweep node with this value counts, also one excluded for another reason: a domain
    // with a node condemned before the all-reduce, or already named, is not this rule's.
    bool whole = true;
    for (const auto& n : nodes) {
      whole = whole && (members.count(n) > 0 || LabelOf(known, n, key) != value);
    }
    if (!whole) continue;
    bool every_pair_bad = true, any_pair = false;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!Touches(groups[g], members)) continue;
      any_pair = true;
      every_pair_bad = every_pair_bad && judged[g].bad;
    }
    if (any_pair && every_pair_bad) out.emplace(value, std::move(members));
  }
  return out;
}

std::string NodeWithPort(const std::map<std::string, v1::Node>& known, const std::string& node) {
  const std::string port = LabelOf(known, node, "port");
  return port.empty() ? node : absl::StrCat(node, " port ", port);
}

}  // namespace

const std::vector<std::string>& FabricLabels() {
  static const std::vector<std::string> labels = {"switch", "rack"};
  return labels;
}

std::vector<NamedFabricFault> FindFabricFaults(const std::vector<std::string>& nodes,
                                               const std::vector<std::vector<std::string>>& groups,
                                               const std::vector<GroupJudgement>& judged,
                                               const std::map<std::string, v1::Node>& known,
                                               const std::set<std::string>& condemned_before) {
  // Domains whose nodes an earlier stage condemned are not candidates (Candidates needs every
  // node of the value): the earlier verdicts stand on their own.
  std::set<std::string> named_nodes;
  std::vector<std::pair<std::string, std::pair<std::string, std::set<std::string>>>> named;
  for (const std::string& key : FabricLabels()) {
    std::set<std::string> excluded = named_nodes;
    excluded.insert(condemned_before.begin(), condemned_before.end());
    for (auto& [value, members] : Candidates(key, nodes, groups, judged, known, excluded)) {
      named_nodes.insert(members.begin(), members.end());
      named.push_back({key, {value, std::move(members)}});
    }
  }
  if (named.empty()) return {};
  // Pairs elsewhere must have passed, and there must be one: otherwise nothing says where.
  int passed_elsewhere = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (Touches(groups[g], named_nodes) || !judged[g].measured) continue;
    if (judged[g].bad) return {};
    ++passed_elsewhere;
  }
  if (passed_elsewhere == 0) return {};

  std::vector<NamedFabricFault> out;
  for (const auto& [key, domain] : named) {
    const auto& [value, members] = domain;
    NamedFabricFault f;
    f.fault.set_label(key);
    f.fault.set_value(value);
    std::vector<std::string> described;
    for (const auto& n : nodes) {  // the sweep's (ring) order
      if (!members.count(n)) continue;
      f.fault.add_nodes(n);
      // The reason a cordon carries has a bound (2 KiB): a big switch's nodes are counted.
      if (described.size() < kNodesNamed) described.push_back(NodeWithPort(known, n));
    }
    if (members.size() > kNodesNamed) {
      described.push_back(absl::StrCat("and ", members.size() - kNodesNamed, " more"));
    }
    v1::HealthVerdict verdict = v1::HEALTH_VERDICT_SLOW;  // unless a pair failed outright
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!Touches(groups[g], members)) continue;
      f.fault.add_pairs(absl::StrCat(absl::StrJoin(groups[g], "+"), ": ", judged[g].why));
      if (verdict == v1::HEALTH_VERDICT_SLOW) verdict = judged[g].verdict;
    }
    f.fault.set_verdict(verdict);
    f.fault.set_finding(absl::StrCat(
        key, " ", value, " (", absl::StrJoin(described, ", "), "): all ", f.fault.pairs_size(),
        " all-reduce pairs that reach it ",
        verdict == v1::HEALTH_VERDICT_SLOW ? "were slow" : "failed", "; the ", passed_elsewhere,
        " pair", passed_elsewhere == 1 ? "" : "s", " elsewhere passed"));
    f.evidence = {{"fabric_nodes", static_cast<double>(members.size())},
                  {"fabric_pairs_bad", static_cast<double>(f.fault.pairs_size())},
                  {"fabric_pairs_passed_elsewhere", static_cast<double>(passed_elsewhere)}};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace tessera::health
