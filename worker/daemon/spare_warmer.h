// Makes this node ready to stand in as a hot spare (the scheduler's WarmSpare, spare_nodes.h on
// its side): its pre-flight checks over all of its GPUs, then the images of its pool's running
// runs pulled into the node's image cache by their pinned digests, each with only its owner's
// registry credentials, written for that pull and removed after. The images are released at
// once: the cache keeps them, evictable, so a resumption placed here starts without a pull.
// One warm-up runs at a time on a thread of its own, never on the control stream's; a newer one
// replaces one still waiting.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tessera/v1/worker.pb.h"
#include "worker/image/image_cache.h"

namespace tessera::worker {

struct SpareWarmerOptions {
  std::string state_dir;
  // The node's pre-flight checks (preflight.h); null: none.
  std::function<std::vector<v1::PreflightCheck>(const v1::StartAttempt&)> preflight;
  // The node's image cache; null: this node runs only `image: host` runs.
  std::shared_ptr<image::ImageCache> images;
};

class SpareWarmer {
 public:
  // Told the outcome on the warmer's thread: empty when every check passed and every image is
  // cached, else what failed.
  using Done = std::function<void(const std::string& error)>;

  explicit SpareWarmer(SpareWarmerOptions options);
  // Waits for the warm-up under way (the image cache's CancelPulls ends a pull at once).
  ~SpareWarmer();
  SpareWarmer(const SpareWarmer&) = delete;
  SpareWarmer& operator=(const SpareWarmer&) = delete;

  // Queues `warm`; a warm-up queued before and not yet begun is told "superseded".
  void Warm(v1::WarmSpare warm, Done done);

  // One warm-up, on the caller's thread: the error Done would be told.
  std::string WarmNow(const v1::WarmSpare& warm) const;

 private:
  void Loop();

  const SpareWarmerOptions options_;
  absl::Mutex mu_;
  std::optional<std::pair<v1::WarmSpare, Done>> next_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool warming_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::worker
