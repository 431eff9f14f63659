#include "scheduler/service/spare_nodes.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "proto/policy/preflight.h"
#include "scheduler/placement/proto_convert.h"
#include "scheduler/service/preflight_cordon.h"
#include "scheduler/service/start_message.h"
#include "services/store/cas_retry.h"

namespace tessera::scheduler {
namespace {

// What the cycle must stop for (the store away); anything else is logged and left for the next
// cycle, so that one node's trouble never stops placement.
absl::Status OnlyUnavailable(const absl::Status& st, const std::string& what) {
  if (st.ok() || absl::IsUnavailable(st)) return st;
  spdlog::warn("{}: {}", what, st.ToString());
  return absl::OkStatus();
}

bool IsRunnableImage(const std::string& image) { return !image.empty() && image != "host"; }

// The registry a reference names ("reg.example.com:5000/team/x:1"), or "" when it names none
// (the node's default registry then decides, so any of the owner's may be the one).
std::string NamedRegistry(const std::string& image) {
  const size_t slash = image.find('/');
  if (slash == std::string::npos) return "";
  const std::string first = image.substr(0, slash);
  const bool host = first.find_first_of(".:") != std::string::npos || first == "localhost";
  return host ? first : "";
}

}  // namespace

SparePool PoolOf(const v1::Node& node) {
  return {node.cluster(), node.gpu_type(), node.gpu_count()};
}

bool ResumesAfterNodeFault(const v1::Run& run) {
  if (run.status() != v1::RUN_STATUS_QUEUED) return false;
  switch (run.requeued_after()) {
    case v1::ATTEMPT_END_REASON_NODE_FAILURE:
    case v1::ATTEMPT_END_REASON_GPU_FAULT:
    case v1::ATTEMPT_END_REASON_HANG:
    case v1::ATTEMPT_END_REASON_STRAGGLER:
    case v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED:
      return true;
    default:
      return false;
  }
}

std::set<std::string> ChooseSpares(const std::vector<v1::Node>& nodes,
                                   const std::set<std::string>& busy,
                                   const std::set<std::string>& suspects, int per_pool) {
  std::set<std::string> chosen;
  if (per_pool <= 0) return chosen;
  std::map<SparePool, std::vector<const v1::Node*>> candidates;
  for (const v1::Node& n : nodes) {
    if (!IsSchedulable(n) || busy.count(n.name()) || suspects.count(n.name())) continue;
    candidates[PoolOf(n)].push_back(&n);
  }
  for (auto& [pool, in_pool] : candidates) {
    // The spares a pool has stay spares (they hold the images): a choice that moved with every
    // freed node would warm a new one each time.
    std::sort(in_pool.begin(), in_pool.end(), [](const v1::Node* a, const v1::Node* b) {
      return std::make_tuple(!a->spare(), a->name()) < std::make_tuple(!b->spare(), b->name());
    });
    const size_t keep = std::min(in_pool.size(), static_cast<size_t>(per_pool));
    for (size_t i = 0; i < keep; ++i) chosen.insert(in_pool[i]->name());
  }
  return chosen;
}

std::map<SparePool, std::set<SpareImage>> PoolImages(const std::vector<v1::Run>& active,
                                                     const std::vector<v1::Node>& nodes) {
  std::map<std::string, const v1::Node*> by_name;
  for (const v1::Node& n : nodes) by_name[n.name()] = &n;
  std::map<SparePool, std::set<SpareImage>> images;
  for (const v1::Run& run : active) {
    if (run.status() != v1::RUN_STATUS_RUNNING && run.status() != v1::RUN_STATUS_STARTING) continue;
    if (!IsRunnableImage(run.spec().image()) || run.nodes_size() == 0) continue;
    const auto node = by_name.find(run.nodes(0).node_name());
    if (node == by_name.end()) continue;
    images[PoolOf(*node->second)].insert({run.spec().image(), run.image_digest(), run.id()});
  }
  return images;
}

SpareNodes::SpareNodes(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                       std::shared_ptr<WorkerRegistry> workers,
                       std::shared_ptr<AttemptControl> control, std::shared_ptr<Clock> clock,
                       SchedulerConfig config)
    : nodes_(std::move(nodes)),
      runs_(std::move(runs)),
      workers_(std::move(workers)),
      control_(std::move(control)),
      clock_(std::move(clock)),
      config_(config) {}

absl::StatusOr<bool> SpareNodes::Keep(std::vector<v1::Node>& nodes,
                                      const std::vector<v1::Run>& active,
                                      const std::set<std::string>& busy,
                                      const std::set<std::string>& suspects) {
  spares_changed_ = false;
  const std::set<std::string> chosen = ChooseSpares(nodes, busy, suspects, config_.spares_per_pool);
  std::map<SparePool, std::set<SpareImage>> images;
  std::map<std::string, std::string> drivers;
  bool looked = false;
  for (v1::Node& n : nodes) {
    if (!chosen.count(n.name())) {
      // Taken by a resumption, out of service, or no longer wanted: ordinary again.
      if (n.spare()) TESSERA_RETURN_IF_ERROR(Mark(n, false, ""));
      sent_.erase(n.name());
      continue;
    }
    if (!looked) {
      images = PoolImages(active, nodes);
      drivers = ClusterDriverVersions(nodes);
      looked = true;
    }
    if (!n.spare()) {
      TESSERA_RETURN_IF_ERROR(
          Mark(n, true, "warming: pre-flight checks and the images of its pool's running runs"));
      spdlog::info("node {} is a hot spare of pool {}/{}", n.name(), n.cluster(), n.gpu_type());
    }
    TESSERA_RETURN_IF_ERROR(Settle(n));
    if (!n.spare() || !IsSchedulable(n)) continue;  // cordoned by its checks
    TESSERA_RETURN_IF_ERROR(WarmIfDue(n, images[PoolOf(n)], drivers));
  }
  return spares_changed_;
}

void SpareNodes::OnAck(const v1::CommandAck& ack) {
  absl::MutexLock lock(&mu_);
  const auto it = awaited_.find(ack.command_id());
  if (it == awaited_.end()) return;
  answers_[ack.command_id()] = {ack.ok(), ack.error()};
  awaited_.erase(it);
}

absl::Status SpareNodes::Mark(v1::Node& node, bool spare, const std::string& status) {
  if (node.spare() == spare && node.spare_status() == status) return absl::OkStatus();
  auto updated = store::UpdateNodeWithRetry(
      *nodes_, node.name(),
      [&](v1::Node& n, std::vector<v1::NodeEvent>&) -> absl::StatusOr<store::NodeChange> {
        if (n.spare() == spare && n.spare_status() == status) return store::NodeChange::kNone;
        n.set_spare(spare);
        n.set_spare_status(status);
        return store::NodeChange::kWrite;
      });
  if (!updated.ok()) {
    return OnlyUnavailable(updated.status(), absl::StrCat("marking node ", node.name(),
                                                          spare ? " a spare" : " no spare"));
  }
  if (node.spare() != updated->spare()) spares_changed_ = true;
  node = *std::move(updated);
  return absl::OkStatus();
}

absl::Status SpareNodes::WarmIfDue(const v1::Node& node, const std::set<SpareImage>& images,
                                   const std::map<std::string, std::string>& drivers) {
  const absl::Time now = clock_->Now();
  const auto sent = sent_.find(node.name());
  if (sent != sent_.end() && sent->second.images == images &&
      sent->second.incarnation == node.incarnation() &&
      now - sent->second.sent_at < config_.spare_warm_timeout) {
    return absl::OkStatus();
  }
  v1::ControlMessage msg;
  msg.set_command_id(control_->NextCommandId());
  v1::WarmSpare& warm = *msg.mutable_warm_spare();
  for (const SpareImage& image : images) {
    v1::WarmSpare::Image& w = *warm.add_images();
    w.set_image(image.image);
    w.set_image_digest(image.digest);
    // Only the owner's registry credentials, never their other secrets: the spare pulls, it
    // runs nothing of theirs until a resumption lands on it.
    auto secrets = runs_->RunSecrets(image.run_id);
    if (absl::IsUnavailable(secrets.status())) return secrets.status();
    if (!secrets.ok()) continue;  // pulled without; a private image then fails, and says so
    const std::string registry = NamedRegistry(image.image);
    for (auto& s : *secrets) {
      if (s.secret().type() == v1::SECRET_TYPE_DOCKER_REGISTRY &&
          (registry.empty() || s.secret().server() == registry)) {
        *w.add_registry_credentials() = std::move(s);
      }
    }
  }
  v1::AttemptNode all;
  all.set_node_name(node.name());
  for (int i = 0; i < node.gpu_count(); ++i) {
    all.add_gpu_indices(i);
    warm.add_gpu_indices(i);
  }
  *warm.mutable_preflight() = PreflightFor(all, &node, drivers, config_);
  {
    absl::MutexLock lock(&mu_);
    if (sent != sent_.end()) {
      awaited_.erase(sent->second.command_id);
      answers_.erase(sent->second.command_id);
    }
    awaited_[msg.command_id()] = node.name();
  }
  if (!workers_->Send(node.name(), msg)) {
    absl::MutexLock lock(&mu_);
    awaited_.erase(msg.command_id());
    sent_.erase(node.name());
    return absl::OkStatus();  // its worker is not connected here: next cycle
  }
  spdlog::info("warming spare {}: {} image(s), pre-flight checks on {} GPU(s)", node.name(),
               images.size(), node.gpu_count());
  sent_[node.name()] = {images, node.incarnation(), msg.command_id(), now};
  return absl::OkStatus();
}

absl::Status SpareNodes::Settle(v1::Node& node) {
  const auto sent = sent_.find(node.name());
  if (sent == sent_.end()) return absl::OkStatus();
  Answer answer;
  {
    absl::MutexLock lock(&mu_);
    const auto it = answers_.find(sent->second.command_id);
    if (it == answers_.end()) return absl::OkStatus();
    answer = it->second;
    answers_.erase(it);
  }
  if (answer.ok) {
    const size_t n = sent->second.images.size();
    return Mark(node, true,
                absl::StrCat("ready: ", n, n == 1 ? " image" : " images",
                             " of its pool's running runs pulled, pre-flight checks passed"));
  }
  if (absl::StartsWith(answer.error, kSpareChecksFailedPrefix)) {
    const std::string failed(absl::StripPrefix(answer.error, kSpareChecksFailedPrefix));
    TESSERA_RETURN_IF_ERROR(
        OnlyUnavailable(CordonSpareAfterPreflight(*nodes_, node.name(), failed, clock_->Now()),
                        absl::StrCat("cordoning spare ", node.name())));
    sent_.erase(sent);
    return Mark(node, false, "");
  }
  // An image that could not be had (a registry away, credentials refused): still a spare, for
  // the runs whose images it has; warmed again after the timeout.
  return Mark(node, true, absl::StrCat("not ready: ", answer.error));
}

}  // namespace tessera::scheduler
