// A client of the OCI distribution API (the registry's /v2/ endpoints) for pulling: manifests and
// blobs by digest, each checked against its digest, blobs streamed to the caller as they arrive.
// libcurl does HTTP/1.1 and HTTP/2, TLS, proxies (HTTPS_PROXY, NO_PROXY) and redirects (blob
// stores on other hosts; credentials are never sent to another host or port); this class adds the
// registry's authentication: a 401 names a Bearer token service (asked with the auth file's
// credentials, as Docker Hub, GHCR, Harbor and GitLab do) or Basic.
//
// Trust: a registry's TLS certificate is checked against the system's CAs plus the .crt files of
// `certs_dir`/HOST:PORT/ (the folder layout containers' tools and skopeo read), unless the
// registry is configured insecure, where TLS is used unverified and plain HTTP where the registry
// does not speak TLS (as skopeo's --tls-verify=false).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/image/blob_stream.h"
#include "worker/image/image_reference.h"
#include "worker/image/registry_auth.h"

namespace tessera::worker::image {

struct RegistryClientOptions {
  bool insecure = false;
  RegistryCredentials credentials;  // empty: anonymous
  std::string certs_dir = "/etc/containers/certs.d";
  // When now + this passes without a byte, a transfer is given up (a stalled connection).
  absl::Duration stall_timeout = absl::Seconds(60);
  // Set from elsewhere to stop every transfer (CANCELLED): the worker is shutting down, or the
  // pull failed and the downloads ahead are not needed.
  std::vector<const std::atomic<bool>*> stop_flags;
  // Registry API base URL override ("http://127.0.0.1:5000"), for tests of odd servers.
  std::string base_url;
};

struct Manifest {
  std::string media_type;  // the response's Content-Type (or the document's mediaType)
  std::string body;
};

class RegistryClient {
 public:
  // `ref` names the registry and repository; `deadline` (absl::Now() time) bounds every call.
  RegistryClient(ImageReference ref, RegistryClientOptions options, absl::Time deadline);
  ~RegistryClient();

  // The manifest (or index) with this digest, checked against it.
  absl::StatusOr<Manifest> GetManifest(const std::string& digest);
  // A small blob (an image config), read whole, at most `max_bytes`, checked against `digest`.
  absl::StatusOr<std::string> GetBlob(const std::string& digest, int64_t max_bytes);
  // A blob streamed into `sink` as it arrives; OK once all of it came and matched `digest`
  // (the sink has then seen every byte; on a mismatch, DATA_LOSS after the sink saw them).
  // `size_limit` (>= 0): the blob's size as its manifest says; more is DATA_LOSS, stopped.
  absl::Status StreamBlob(const std::string& digest, const ByteSink& sink, int64_t size_limit = -1);

  // Errors of the calls above are the registry's words with a code: NOT_FOUND (no such image or
  // blob), PERMISSION_DENIED (401/403 with whatever credentials there were), UNAVAILABLE (no
  // connection, TLS refused, 429, 5xx), DEADLINE_EXCEEDED, CANCELLED, DATA_LOSS (a digest
  // mismatch), UNKNOWN (anything else).

 private:
  struct Response;
  // GET base/v2/<repository>/<path>; the body of a 2xx response goes to `sink`. Retries once
  // after a 401 with the credentials the challenge asks for.
  absl::Status Get(const std::string& path, const std::string& accept, const ByteSink& sink,
                   Response* response);
  absl::Status PerformOnce(const std::string& url, const std::string& accept,
                           const std::string& authorization, const ByteSink& sink,
                           Response* response);
  absl::Status Authenticate(const std::string& challenge_header);
  // https, or http for an insecure registry that does not speak TLS: decided once.
  void ResolveBaseUrl();
  absl::Duration TimeLeft() const { return deadline_ - absl::Now(); }

  const ImageReference ref_;
  const RegistryClientOptions options_;
  const absl::Time deadline_;
  std::string ca_bundle_;  // PEM: the system's CAs and the registry's own from certs_dir

  absl::Mutex mu_;
  std::string base_url_ ABSL_GUARDED_BY(mu_);
  std::string authorization_ ABSL_GUARDED_BY(mu_);  // "Bearer ..." / "Basic ..." once known
};

}  // namespace tessera::worker::image
