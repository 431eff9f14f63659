#pragma once
// A node's cache of container images, pulled over the registry's HTTP API (HttpImagePuller) or
// by skopeo (SkopeoImagePuller) and unpacked as they download into root file systems that ranks
// run in. One ImageCache per node (the
// worker daemon owns it) and per cache folder: two processes sharing a folder would evict each
// other's images.
//
// Layout of the folder:
//   bundles/<hex>/   an unpacked image, named by its manifest digest's hex: an OCI runtime
//                    bundle (rootfs/, config.json) plus tessera-size (its bytes, computed once) and
//                    tessera-last-used (the cache clock's time of the last Acquire, in Unix ns)
//   tmp/             pulls in progress and evicted images being deleted; emptied at construction
// A bundle appears by an atomic rename, so a bundle folder is always complete.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "worker/image/http_image_puller.h"
#include "worker/image/image_config.h"
#include "worker/image/image_reference.h"
#include "worker/image/pull_guard.h"
#include "worker/image/registry_auth.h"
#include "worker/image/skopeo_image_puller.h"
#include "worker/image/tool_runner.h"

namespace tessera::worker::image {

struct ImageCacheOptions {
  std::string dir;                 // cache root, created 0700
  int64_t max_bytes = 50LL << 30;  // size limit of the unpacked images kept
  std::string default_registry = "docker.io";
  std::vector<std::string> insecure_registries;  // host:port spoken to over plain HTTP (skopeo
                                                 // --src-tls-verify=false)
  std::string auth_file;  // containers-auth.json for skopeo --authfile; empty: none
  absl::Duration pull_timeout = absl::Minutes(30);
  // Pull over the registry's HTTP API (HttpImagePuller), each layer applied as it downloads; images
  // that path does not read, and every image when false, are pulled by skopeo copy.
  bool pull_over_http = true;
  // Registries' own CA certificates: <certs_dir>/<host:port>/*.crt (as containers' tools read).
  std::string certs_dir = "/etc/containers/certs.d";
  // What a pull may take beyond max_bytes (pull_guard.h): files of one image, and the free space
  // and inodes the cache's disk always keeps.
  int64_t max_files = PullLimits{}.max_files;
  int64_t min_free_bytes = PullLimits{}.min_free_bytes;
  int64_t min_free_inodes = PullLimits{}.min_free_inodes;
};

struct PreparedImage {
  std::string digest;            // sha256:... of the manifest
  std::string rootfs;            // absolute path of the unpacked root file system
  std::vector<std::string> env;  // the image config's Env ("KEY=VALUE"), from the bundle's
                                 // config.json process.env
  std::string working_dir;       // process.cwd from config.json ("/" when absent)
  bool pulled = false;           // false: served from the cache (true also for a call that waited
                                 // for another call's pull of the same image)
};

class ImageCache {
 public:
  // Creates the folders and deletes what a crash left in tmp/. A folder that cannot be created
  // makes every Acquire fail with that error.
  ImageCache(ImageCacheOptions options, std::shared_ptr<ToolRunner> runner,
             std::shared_ptr<Clock> clock);

  // Resolves `ref` (or uses pinned_digest when non-empty, without asking the registry when that
  // digest is cached), pulls and unpacks it unless cached, and marks it in use (Release undoes).
  // progress(text) is told "Pulling image <name>" before a pull and "Pulled image <name>
  // (<digest>) in <s> s" after. Calls for the same image at once share one pull.
  // `auth_file` (a containers auth.json, e.g. from the run's docker-registry secret) is used
  // instead of options' for this call: the registry checks this caller's right to the image
  // whenever its digest is resolved, even when the image is cached.
  absl::StatusOr<PreparedImage> Acquire(const std::string& ref, const std::string& pinned_digest,
                                        const std::function<void(const std::string&)>& progress,
                                        const std::string& auth_file = "");
  // Ends one Acquire's use of the image with this digest: once no use is left it may be evicted.
  void Release(const std::string& digest);
  // The registry (host[:port]) `ref` is pulled from; empty for a reference that does not parse.
  std::string RegistryOf(const std::string& ref) const;
  // Deletes least-recently-used unpacked images not in use until the total is within max_bytes.
  // Called after each pull; returns bytes freed.
  int64_t Evict();
  // The bytes of the unpacked images kept (tessera-size of each bundle).
  int64_t TotalBytes();
  // Stops the pulls under way (their Acquire fails, CANCELLED) and refuses new ones: the worker
  // is shutting down.
  void CancelPulls() {
    cancelled_ = true;
    runner_->CancelAll();
  }

 private:
  // A pull in progress, shared by the calls that wait for it.
  struct Pull {
    bool done = false;
    absl::Status status;
    int waiters = 0;  // calls waiting; counted in use by the puller when it succeeds
  };
  struct Bundle {
    std::string hex;
    int64_t bytes = 0;
    absl::Time last_used;
  };

  // The pinned digest, the reference's own, or the registry's answer to skopeo inspect.
  absl::StatusOr<std::string> ResolveDigest(const ImageReference& ref,
                                            const std::string& pinned_digest,
                                            const std::string& auth_file, absl::Time deadline);
  // Pulls the image into a bundle in tmp/ (over HTTP, or by skopeo for what that does not
  // read) and renames the bundle into bundles/.
  absl::Status PullAndUnpack(const ImageReference& ref, const std::string& digest,
                             const std::string& auth_file, absl::Time deadline);
  absl::StatusOr<PreparedImage> Load(const ImageReference& ref, const std::string& digest,
                                     bool pulled);
  // Marks one more use and records the cache clock's time in tessera-last-used.
  void MarkInUse(const std::string& hex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Bundle> ListBundles() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string BundlePath(const std::string& hex) const;

  const ImageCacheOptions options_;
  const std::shared_ptr<ToolRunner> runner_;
  const std::shared_ptr<Clock> clock_;
  absl::Status init_status_;
  std::atomic<bool> cancelled_{false};
  const HttpImagePuller http_;
  const SkopeoImagePuller skopeo_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Pull>> pulls_ ABSL_GUARDED_BY(mu_);  // by digest hex
  std::map<std::string, int> in_use_ ABSL_GUARDED_BY(mu_);                   // by digest hex
};

}  // namespace tessera::worker::image
