#include "server/runs_flags.h"

namespace tessera::server {

void AddRunsFlags(CLI::App& app, RunsFlags& f) {
  app.add_option("--secrets-key-file", f.secrets_key_file,
                 "a file (mode 600) holding the 32-byte key, as 64 hex digits (openssl rand "
                 "-hex 32), that users' secrets are encrypted with at rest (without it, the "
                 "cluster keeps no secrets)")
      ->envname("TESSERA_SECRETS_KEY_FILE");
  app.add_option("--tls-ca-key", f.ca_key_file,
                 "PEM private key of the cluster CA (--tls-ca): nodes that join get a "
                 "certificate signed with it (without it, only a node key)")
      ->envname("TESSERA_TLS_CA_KEY");
  app.add_option("--node-certificate-days", f.node_certificate_days,
                 "how long a node's certificate is valid; workers renew it when a third is left")
      ->capture_default_str()
      ->check(CLI::Range(1.0 / 24, 3650.0));
  app.add_option("--run-retention-days", f.run_retention_days,
                 "delete a run (its record, attempts, events and logs) this many days after it "
                 "ended (0: keep it until someone deletes it)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 36500.0));
  app.add_flag("--allow-host-image", f.allow_host_image,
               "accept runs with no image (or image: host), which run on the nodes' own root "
               "file system (still sandboxed): for development clusters and the quick start");
  app.add_option("--max-waiting-runs-per-user", f.admission.max_waiting_runs_per_user,
                 "how many runs one user may have pending or queued at once; a submit past it "
                 "is refused, naming this limit (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10'000'000));
  app.add_option("--max-submits-per-user-per-second", f.admission.max_submits_per_user_per_second,
                 "how fast one user may submit runs (ten seconds' worth at once); a submit "
                 "past it is refused, saying when to submit again; operators and admins are "
                 "not held to it (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1'000'000.0));
  app.add_option("--high-priority-users", f.high_priority_users,
                 "users who may give their runs priority high (operators and admins always "
                 "may); comma-separated")
      ->delimiter(',');
  app.add_option("--high-priority-teams", f.high_priority_teams,
                 "teams whose members may give their runs priority high; comma-separated")
      ->delimiter(',');
  app.add_option("--min-hang-timeout-seconds", f.min_hang_timeout_seconds,
                 "the shortest scheduling.hang_timeout a run may ask for (each hang has its "
                 "node checked by a sweep)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
}

absl::StatusOr<RunsOptions> FinishRunsFlags(const RunsFlags& f, const std::string& tls_ca_file) {
  RunsOptions o;
  if (!f.secrets_key_file.empty()) {
    auto box = runs::SecretBox::FromKeyFile(f.secrets_key_file);
    if (!box.ok()) return box.status();
    o.secrets_box = *std::move(box);
  }
  if (!f.ca_key_file.empty()) {
    if (tls_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-ca-key needs --tls-ca (the CA's certificate)");
    }
    auto ca = tls::CertificateAuthority::Load(tls_ca_file, f.ca_key_file);
    if (!ca.ok()) return ca.status();
    o.ca = *std::move(ca);
  }
  o.node_certificate_validity = absl::Hours(24 * f.node_certificate_days);
  o.min_hang_timeout = absl::Seconds(f.min_hang_timeout_seconds);
  o.allow_host_image = f.allow_host_image;
  o.admission = f.admission;
  o.admission.high_priority_users = {f.high_priority_users.begin(), f.high_priority_users.end()};
  o.admission.high_priority_teams = {f.high_priority_teams.begin(), f.high_priority_teams.end()};
  o.run_retention = absl::Seconds(f.run_retention_days * 86400);
  return o;
}

}  // namespace tessera::server
