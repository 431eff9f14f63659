#include "worker/daemon/node_credentials.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/timestamps.h"
#include "tessera/v1/admin.grpc.pb.h"
#include "transport/endpoints.h"
#include "transport/grpc_status.h"
#include "transport/tls/certificate_authority.h"
#include "worker/common/worker_channel.h"
#include "worker/daemon/rank_identity.h"

namespace tessera::worker {
namespace {

absl::Status PrepareFolder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--credentials-dir: cannot create ", dir, ": ", ec.message()));
  }
  if (::chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("chmod 700 ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The control plane's channel for joining: TLS that checks the server against the cluster CA,
// without a client certificate (the node has none yet); plain text on loopback only.
std::shared_ptr<grpc::Channel> JoinChannel(const std::string& endpoint, const tls::TlsFlags& tls) {
  tls::TlsFlags server_only;
  server_only.plaintext = tls.plaintext;
  server_only.ca_file = tls.ca_file;
  return WorkerChannel(endpoint, server_only);
}

}  // namespace

CredentialFiles CredentialFiles::In(const std::string& dir) {
  return {dir + "/node-api.key", dir + "/node.pem", dir + "/node.key"};
}

absl::StatusOr<CredentialFiles> JoinIfNeeded(const JoinOptions& o) {
  const CredentialFiles files = CredentialFiles::In(o.credentials_dir);
  if (std::filesystem::exists(files.api_key)) return files;  // joined before
  if (o.token_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no credentials: give --join-token-file (a token from `mcli admin create-join-token "
        "--node ",
        o.node, "`) or --api-key-file"));
  }
  auto token = ReadSecretFile("--join-token-file", o.token_file);
  if (!token.ok()) return token.status();
  if (auto st = PrepareFolder(o.credentials_dir); !st.ok()) return st;

  // The key pair is made here and its private half never leaves the node.
  auto pair = tls::MakeKeyAndCsr("node:" + o.node);
  if (!pair.ok()) return pair.status();
  v1::JoinRequest req;
  req.set_token(*token);
  req.set_node(o.node);
  req.set_csr_pem(pair->csr_pem);
  auto target = GrpcTarget("--join-endpoint", o.endpoint);
  if (!target.ok()) return target.status();
  auto stub = v1::NodeJoin::NewStub(JoinChannel(*target, o.tls));
  const absl::Time give_up = absl::Now() + o.timeout;
  v1::JoinResponse resp;
  absl::Status st;
  // The control plane may still be starting: an unreachable one is tried again until the timeout.
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(std::min(give_up, absl::Now() + absl::Seconds(10))));
    st = FromGrpcStatus(stub->Join(&ctx, req, &resp));
    if (!absl::IsUnavailable(st) && !absl::IsDeadlineExceeded(st)) break;
    if (absl::Now() + absl::Seconds(1) >= give_up) break;
    absl::SleepFor(absl::Seconds(1));
  }
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("joining as node ", o.node, " at ", o.endpoint,
                                                ": ", st.message()));
  }
  if (!resp.certificate_pem().empty()) {
    if (auto w = WriteFileDurably(files.private_key, pair->key_pem, 0600); !w.ok()) return w;
    if (auto w = WriteFileDurably(files.certificate, resp.certificate_pem(), 0644); !w.ok()) {
      return w;
    }
  }
  // Last: its presence means "joined".
  if (auto w = WriteFileDurably(files.api_key, resp.api_key() + "\n", 0600); !w.ok()) return w;
  spdlog::info("joined as node {} (key {}{})", o.node, resp.key_id(),
               resp.certificate_pem().empty()
                   ? ", no certificate: the control plane does not sign them"
                   : absl::StrCat(", certificate valid until ",
                                  absl::FormatTime(FromProtoTime(resp.certificate_expires_at()))));
  return files;
}

NodeCertificateRenewal::NodeCertificateRenewal(CredentialFiles files, std::string endpoint,
                                               std::string api_key, tls::TlsFlags tls,
                                               std::shared_ptr<Clock> clock,
                                               absl::Duration check_every)
    : files_(std::move(files)),
      endpoint_(std::move(endpoint)),
      api_key_(std::move(api_key)),
      tls_(std::move(tls)),
      clock_(std::move(clock)),
      check_every_(check_every),
      // Paced on the monotonic clock (a step of the wall clock neither skips nor repeats a
      // check); `clock` says what time it is for the certificate's validity.
      runner_(
          MonotonicClock::Shared(), check_every_, [this] { Check(); },
          PeriodicRunner::FirstRun::kAtOnce) {}

void NodeCertificateRenewal::Check() {
  if (auto st = CheckOnce(); !st.ok()) {
    spdlog::warn("node certificate not renewed (trying again in {}): {}",
                 absl::FormatDuration(check_every_), st.ToString());
  }
}

absl::Status NodeCertificateRenewal::CheckOnce() {
  auto pem = ReadWholeFile(files_.certificate);
  if (!pem.ok()) return pem.status();
  auto info = tls::ReadCertificateInfo(*pem);
  if (!info.ok()) return info.status();
  const absl::Time now = clock_->Now();
  if (now < info->not_after - (info->not_after - info->not_before) / 3) return absl::OkStatus();

  auto pair = tls::MakeKeyAndCsr(info->common_name);
  if (!pair.ok()) return pair.status();
  v1::RenewNodeCertificateRequest req;
  req.set_csr_pem(pair->csr_pem);
  auto target = GrpcTarget("--join-endpoint", endpoint_);
  if (!target.ok()) return target.status();
  // Over the node's current identity: its certificate (still valid) and its key.
  auto stub = v1::NodeJoin::NewStub(WorkerChannel(*target, tls_));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + api_key_);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::RenewNodeCertificateResponse resp;
  if (auto st = FromGrpcStatus(stub->RenewNodeCertificate(&ctx, req, &resp)); !st.ok()) return st;
  // The key first, then the certificate: the pair is mismatched only between the two renames.
  if (auto st = WriteFileDurably(files_.private_key, pair->key_pem, 0600); !st.ok()) return st;
  if (auto st = WriteFileDurably(files_.certificate, resp.certificate_pem(), 0644); !st.ok()) {
    return st;
  }
  spdlog::info("node certificate renewed until {}",
               absl::FormatTime(FromProtoTime(resp.certificate_expires_at())));
  return absl::OkStatus();
}

}  // namespace tessera::worker
