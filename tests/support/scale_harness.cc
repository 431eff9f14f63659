#include "tests/support/scale_harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/timestamps.h"
#include "services/admin/admin_handler.h"
#include "services/store/stores.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tests/support/binaries.h"
#include "tests/support/control_plane.h"
#include "tests/support/held_run_follows.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"
#include "tests/support/process_stats.h"

namespace tessera::testing {
namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct DatabaseCounters {
  int64_t commits = 0, rows = 0, bytes = 0;
};
// Summed over the databases at `urls`.
DatabaseCounters ReadCounters(const std::vector<std::string>& urls) {
  DatabaseCounters sum;
  for (const std::string& url : urls) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    const auto row = tx.exec1(
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted,"
        " pg_database_size(current_database()) FROM pg_stat_database"
        " WHERE datname = current_database()");
    sum.commits += row[0].as<int64_t>();
    sum.rows += row[1].as<int64_t>();
    sum.bytes += row[2].as<int64_t>();
  }
  return sum;
}

ScaleReport::DatabaseSample SampleDatabase(const std::string& url, absl::Duration since_start) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  const auto row = tx.exec1(
      "SELECT pg_database_size(current_database()), (SELECT count(*) FROM runs),"
      " (SELECT count(*) FROM log_chunks), (SELECT count(*) FROM log_chunks c WHERE NOT EXISTS"
      " (SELECT 1 FROM runs r WHERE r.id = c.run_id))");
  return {absl::ToDoubleSeconds(since_start), row[0].as<int64_t>(), row[1].as<int64_t>(),
          row[2].as<int64_t>(), row[3].as<int64_t>()};
}

pid_t PostmasterPid(const std::string& url) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  const pid_t backend = tx.exec1("SELECT pg_backend_pid()")[0].as<pid_t>();
  return ParentOf(backend);
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& key) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// One plain-HTTP GET /metrics on 127.0.0.1:`port` with the scrape token: the milliseconds from
// sending the request to the end of the answer, and the answer's bytes (an answer other than
// 200 is an error: a refusal is quick and would pass for a fast scrape). `body` (when given)
// gets the answer.
absl::StatusOr<std::pair<double, int64_t>> ScrapeMetrics(int port, const std::string& token,
                                                         std::string* body = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect to the metrics port ", port));
  }
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ", token,
                   "\r\nConnection: close\r\n\r\n");
  const absl::Time start = absl::Now();
  int64_t bytes = 0;
  std::string status_line;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[1 << 16];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
      if (status_line.size() < 12) status_line.append(buffer, std::min<size_t>(n, 12));
      if (body != nullptr) body->append(buffer, static_cast<size_t>(n));
      bytes += n;
    }
  }
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  ::close(fd);
  if (bytes == 0) return absl::UnavailableError("no answer from /metrics");
  if (!absl::StartsWith(status_line, "HTTP/1.1 200")) {
    return absl::UnavailableError(
        absl::StrCat("/metrics answered \"", status_line.substr(0, 12), "\""));
  }
  return std::make_pair(ms, bytes);
}

}  // namespace

absl::StatusOr<ScaleReport> RunScale(const ScaleOptions& o) {
  ScaleReport r;
  r.nodes = o.nodes;
  auto pg = PostgresServer::Start(/*ephemeral=*/!o.durable_database);
  if (!pg.ok()) return pg.status();
  const std::string url = (*pg)->url();

  // Keys straight into the database (as `tessera-server create-api-key` does), one per node.
  std::vector<SimFleet::NodeSpec> nodes;
  std::string admin_key, flooder_key, watcher_key;
  {
    auto stores = store::OpenPostgresStores({.url = url, .pool_size = 2});
    if (!stores.ok()) return stores.status();
    SystemClock clock;
    const auto make_key = [&](const std::string& user, v1::Role role,
                              const std::string& node) -> absl::StatusOr<std::string> {
      v1::CreateApiKeyRequest req;
      req.set_user(user);
      req.set_role(role);
      req.set_node(node);
      return admin::CreateApiKeyDirect(*stores->api_keys, clock, req);
    };
    auto key = make_key("bench-admin", v1::ROLE_ADMIN, "");
    if (!key.ok()) return key.status();
    admin_key = *key;
    auto mallory_key = make_key("mallory", v1::ROLE_USER, "");
    if (!mallory_key.ok()) return mallory_key.status();
    flooder_key = *mallory_key;
    auto wendy_key = make_key("wendy", v1::ROLE_USER, "");
    if (!wendy_key.ok()) return wendy_key.status();
    watcher_key = *wendy_key;
    for (int i = 0; i < o.nodes; ++i) {
      const std::string name = absl::StrFormat("sim-%05d", i);
      auto node_key = make_key(name, v1::ROLE_NODE, name);
      if (!node_key.ok()) return node_key.status();
      nodes.push_back({SimulatedNode(name, o.gpus_per_node, absl::StrCat("s", i / 32)), *node_key});
    }
  }

  const std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("tessera-scale-", getpid());
  std::filesystem::create_directories(dir);
  // /metrics is scraped as Prometheus scrapes it: with a token from a file only its owner reads.
  const std::string scrape_token = "scale-harness-scrape-token-0123456789";
  if (auto st = WriteFileDurably(dir + "/metrics.token", scrape_token, 0600); !st.ok()) return st;
  std::vector<std::string> argv = {BinaryPath("tessera-server"),
                                   "--metrics-token-file",
                                   dir + "/metrics.token",
                                   "--database-url",
                                   url,
                                   "--grpc-listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--http-listen",
                                   "127.0.0.1:0",
                                   "--log-level",
                                   "warn",
                                   "--plaintext",
                                   "--allow-host-image",
                                   "--sweep-interval-seconds",
                                   "0"};
  std::vector<std::string> databases = {url};
  if (o.logs_database) {
    auto logs_url = (*pg)->CreateDatabase("tessera_logs");
    if (!logs_url.ok()) return logs_url.status();
    argv.push_back("--logs-database-url");
    argv.push_back(*logs_url);
    databases.push_back(*logs_url);
  }
  if (o.log_follows + o.run_watches > 0) {
    argv.push_back("--max-streams-per-user");
    argv.push_back(absl::StrCat(std::max(o.log_follows, o.run_watches) + 100));
  }
  if (o.run_watches > 0) {  // wendy opens hers at once (a user's calls are limited; admins' not)
    argv.push_back("--max-calls-per-user-per-second");
    argv.push_back(absl::StrCat(std::max(200, o.run_watches)));
  }
  argv.insert(argv.end(), o.server_flags.begin(), o.server_flags.end());
  auto server = Process::Start(argv, dir + "/server.log");
  if (!server.ok()) return server.status();
  auto listening = server->WaitForLine("listening grpc=");
  if (!listening.ok()) return listening.status();
  const size_t at = listening->find("grpc=") + 5;
  const std::string endpoint = "127.0.0.1:" + listening->substr(at, listening->find(' ', at) - at);
  const size_t metrics_at = listening->find("metrics=") + 8;
  const int metrics_port = std::atoi(
      listening->substr(metrics_at, listening->find(' ', metrics_at) - metrics_at).c_str());
  const size_t http_at = listening->find("http=") + 5;
  const int http_port = std::atoi(listening->substr(http_at).c_str());

  SimFleetOptions fleet_options = o.fleet;
  fleet_options.endpoint = endpoint;
  const std::string held_prefix = "followed-";
  if (o.log_follows > 0) fleet_options.held_run_prefix = held_prefix;
  SimFleet fleet(fleet_options, nodes);
  if (auto st = fleet.Start(o.connect_spread, absl::Seconds(30) + o.connect_spread); !st.ok()) {
    return st;
  }
  absl::SleepFor(o.warm_up);

  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto runs = v1::RunService::NewStub(channel);
  auto cordon = v1::CordonService::NewStub(channel);
  auto logs = v1::LogService::NewStub(channel);

  // The followed run, running before the window; its follows all open before it too.
  std::unique_ptr<SseFollowers> follows;
  if (o.log_follows > 0) {
    auto opened = FollowHeldRun(
        *runs, admin_key, held_prefix + "0", o.gpus_per_node, http_port, o.log_follows, [&] {
          std::string body;
          if (!ScrapeMetrics(metrics_port, scrape_token, &body).ok()) return 0.0;
          const size_t at = body.find("\ntessera_logs_followers ");
          return at == std::string::npos ? 0.0 : std::atof(body.c_str() + at + 24);
        });
    if (!opened.ok()) return opened.status();
    follows = *std::move(opened);
    r.follows_open = follows->open();
  }
  std::unique_ptr<SseFollowers> watches;
  if (o.run_watches > 0) {
    auto opened = WatchRunChanges(http_port, watcher_key, o.run_watches);
    if (!opened.ok()) return opened.status();
    watches = *std::move(opened);
    r.watches_open = watches->open();
  }
  if (follows || watches) absl::SleepFor(o.warm_up);

  const pid_t postmaster = PostmasterPid(url);
  const DatabaseCounters db_before = ReadCounters(databases);
  const auto db_cpu_before = DatabaseCpu(postmaster);
  const double server_cpu_before = CpuSeconds(server->pid());
  fleet.TakeHeartbeatRtts();
  fleet.TakeHeartbeatGaps();
  const absl::Time begin = absl::Now();

  // Mallory's flood, for the whole window.
  std::optional<SubmitFlood> flood;
  if (o.flooders > 0) flood.emplace(*runs, flooder_key, o.flooders, o.gpus_per_node);

  // Runs at a steady rate; nodes killed halfway.
  std::map<std::string, absl::Time> submitted;  // run id -> when SubmitRun returned
  std::map<std::string, std::string> run_names;
  std::map<std::string, absl::Time> killed;  // node -> its last heartbeat
  const int total_runs = static_cast<int>(o.submit_rate * absl::ToDoubleSeconds(o.measure));
  bool kills_done = false;
  absl::Time next_sample = begin;
  for (int i = 0; absl::Now() - begin < o.measure; ++i) {
    if (o.database_size_every > absl::ZeroDuration() && absl::Now() >= next_sample) {
      r.database_samples.push_back(SampleDatabase(url, absl::Now() - begin));
      next_sample += o.database_size_every;
    }
    const absl::Time due =
        begin + absl::Seconds(static_cast<double>(i) / std::max(o.submit_rate, 0.001));
    if (!kills_done && due - begin >= o.measure / 2) {
      // The last nodes: the scheduler fills nodes in its own order, so these may run attempts.
      for (int k = 0; k < o.kill_nodes; ++k) {
        const size_t n = fleet.size() - 1 - static_cast<size_t>(k);
        killed[fleet.node_name(n)] = fleet.Kill(n);
      }
      kills_done = true;
    }
    if (i >= total_runs) {
      absl::SleepFor(absl::Milliseconds(50));
      continue;
    }
    if (due > absl::Now()) absl::SleepFor(due - absl::Now());
    v1::SubmitRunRequest req;
    auto* spec = req.mutable_spec();
    spec->set_name(absl::StrCat("scale-", i));
    spec->set_command("python train.py");
    spec->mutable_compute()->set_gpus(o.gpus_per_node);
    spec->mutable_compute()->set_cluster("local");
    v1::SubmitRunResponse resp;
    const grpc::Status st = runs->SubmitRun(Ctx(admin_key).get(), req, &resp);
    if (!st.ok()) return absl::InternalError(absl::StrCat("submit: ", st.error_message()));
    submitted[resp.run().id()] = absl::Now();
    run_names[resp.run().id()] = resp.run().name();
  }
  if (flood) r.flood = flood->Stop();
  const absl::Time end = absl::Now();
  r.seconds = absl::ToDoubleSeconds(end - begin);
  r.server_cores = (CpuSeconds(server->pid()) - server_cpu_before) / r.seconds;
  r.server_rss_bytes = RssBytes(server->pid());
  r.server_threads = ThreadsOf(server->pid());
  if (follows) r.follows_open_at_end = follows->open();
  if (watches) r.watches_open_at_end = watches->open();
  follows.reset();
  watches.reset();
  double db_cpu = 0;
  for (const auto& [pid, after] : DatabaseCpu(postmaster)) {
    auto before = db_cpu_before.find(pid);
    db_cpu += after - (before == db_cpu_before.end() ? 0 : before->second);
  }
  r.database_cores = db_cpu / r.seconds;
  // /metrics with every node known, as Prometheus scrapes it.
  std::vector<double> scrapes;
  for (int i = 0; i < 20; ++i) {
    auto scraped = ScrapeMetrics(metrics_port, scrape_token);
    if (!scraped.ok()) return scraped.status();
    scrapes.push_back(scraped->first);
    r.metrics_bytes = scraped->second;
  }
  std::sort(scrapes.begin(), scrapes.end());
  r.metrics_scrape_p50_ms = scrapes[scrapes.size() / 2];
  r.metrics_scrape_max_ms = scrapes.back();
  const DatabaseCounters db_after = ReadCounters(databases);
  r.commits_per_second = static_cast<double>(db_after.commits - db_before.commits) / r.seconds;
  r.rows_written_per_second = static_cast<double>(db_after.rows - db_before.rows) / r.seconds;
  r.database_bytes = db_after.bytes;
  if (o.database_size_every > absl::ZeroDuration()) {
    r.database_samples.push_back(SampleDatabase(url, end - begin));
  }
  std::vector<double> rtts;
  for (int64_t us : fleet.TakeHeartbeatRtts()) rtts.push_back(static_cast<double>(us) / 1000);
  r.heartbeats = static_cast<int64_t>(rtts.size());
  r.heartbeat_rtt_p50_ms = Percentile(rtts, 0.5);
  r.heartbeat_rtt_p99_ms = Percentile(rtts, 0.99);
  std::vector<double> gaps;
  for (int64_t us : fleet.TakeHeartbeatGaps()) gaps.push_back(static_cast<double>(us) / 1000);
  r.heartbeat_gap_p99_ms = Percentile(gaps, 0.99);
  r.heartbeat_gap_max_ms = Percentile(gaps, 1.0);
  r.runs_submitted = static_cast<int>(submitted.size());

  // Every attempt ends within its duration; then what was seen is settled.
  const absl::Time settle = absl::Now() + fleet_options.attempt_duration + absl::Seconds(10);
  while (absl::Now() < settle) {
    int open = 0;
    std::set<std::string> started;
    for (const auto& a : fleet.Attempts()) {
      if (!submitted.contains(a.run_id)) continue;
      started.insert(a.run_id);
      if (!a.finished_at) ++open;
    }
    if (open == 0 && started.size() >= submitted.size()) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  std::map<std::string, SimAttempt> first_attempt;
  std::vector<double> to_start;
  // The steady runs' attempts (mallory's are her own business).
  for (const auto& a : fleet.Attempts()) {
    if (!submitted.contains(a.run_id)) continue;
    if (a.starts_received > 1) r.starts_sent_again += a.starts_received - 1;
    ++r.attempts_started;
    if (a.finished_at) ++r.attempts_finished;
    r.lines_pushed += a.lines_pushed;
    auto [it, fresh] = first_attempt.try_emplace(a.run_id, a);
    if (!fresh && a.resumption_index < it->second.resumption_index) it->second = a;
  }
  for (const auto& [id, at] : submitted) {
    auto a = first_attempt.find(id);
    if (a == first_attempt.end()) {
      r.not_started.push_back(run_names[id]);
      continue;
    }
    to_start.push_back(absl::ToDoubleMilliseconds(a->second.started_at - at));
  }
  for (const auto& a : fleet.Attempts()) {
    if (!submitted.contains(a.run_id)) continue;
    if (!a.finished_at && !killed.contains(a.node)) r.not_finished.push_back(a.run_id);
  }
  r.submit_to_start_p50_ms = Percentile(to_start, 0.5);
  r.submit_to_start_p99_ms = Percentile(to_start, 0.99);
  r.log_push_failures = fleet.log_push_failures();
  r.streams_dropped = fleet.streams_dropped();
  r.drop_reasons = fleet.DropReasons();

  // Lost nodes, from the node events.
  v1::ListNodeEventsRequest events_req;
  events_req.mutable_filter()->add_types(v1::NODE_EVENT_TYPE_LOST);
  events_req.mutable_filter()->set_limit(10000);
  v1::ListNodeEventsResponse events;
  if (const grpc::Status st = cordon->ListNodeEvents(Ctx(admin_key).get(), events_req, &events);
      !st.ok()) {
    return absl::InternalError(absl::StrCat("node events: ", st.error_message()));
  }
  std::set<std::string> lost_counted;
  for (const auto& e : events.events()) {
    auto k = killed.find(e.node_name());
    if (k == killed.end()) {
      r.falsely_lost.push_back(e.node_name());
    } else if (lost_counted.insert(e.node_name()).second) {
      r.lost_after_ms.push_back(absl::ToDoubleMilliseconds(FromProtoTime(e.time()) - k->second));
    }
  }

  // Every pushed line readable once.
  int checked = 0;
  for (const auto& a : fleet.Attempts()) {
    if (a.lines_pushed == 0 || !submitted.contains(a.run_id)) continue;
    if (o.check_logs_of < 0 || (o.check_logs_of > 0 && checked >= o.check_logs_of)) break;
    ++checked;
    v1::GetLogsRequest req;
    req.set_run_name(run_names.contains(a.run_id) ? run_names[a.run_id] : a.run_id);
    req.set_resumption_index(a.resumption_index);
    auto ctx = Ctx(admin_key);
    auto reader = logs->GetLogs(ctx.get(), req);
    std::set<std::tuple<int, int, int64_t>> seen;
    int64_t read = 0, duplicates = 0;
    v1::LogLine line;
    while (reader->Read(&line)) {
      if (line.node_name() != a.node) continue;  // the attempt's other nodes' lines
      ++read;
      if (!seen.insert({line.rank(), line.stream(), line.sequence()}).second) ++duplicates;
    }
    const grpc::Status st = reader->Finish();
    r.lines_read += read;
    if (!st.ok() || read != a.lines_pushed || duplicates > 0) {
      r.log_mismatches.push_back(absl::StrCat(a.run_id, "/", a.resumption_index, " on ", a.node,
                                              ": pushed ", a.lines_pushed, ", read ", read, " (",
                                              duplicates, " twice) ", st.error_message()));
    }
  }
  return r;
}

}  // namespace tessera::testing
