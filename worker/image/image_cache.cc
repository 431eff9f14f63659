#include "worker/image/image_cache.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/image/cache_files.h"

namespace tessera::worker::image {
namespace fs = std::filesystem;

namespace {

constexpr size_t kDigestPrefix = 7;  // "sha256:"

ImageCacheOptions Normalized(ImageCacheOptions options) {
  // Absolute: the rootfs handed to ranks and the paths given to the tools must not depend on the
  // current folder.
  if (!options.dir.empty()) {
    std::error_code ec;
    const fs::path dir = fs::absolute(options.dir, ec).lexically_normal();
    if (!ec) options.dir = dir.string();
    while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  }
  return options;
}

PullSettings SettingsOf(const ImageCacheOptions& options) {
  return PullSettings{.insecure_registries = options.insecure_registries,
                      .certs_dir = options.certs_dir,
                      .max_bytes = options.max_bytes,
                      .pull_timeout = options.pull_timeout};
}

}  // namespace

ImageCache::ImageCache(ImageCacheOptions options, std::shared_ptr<ToolRunner> runner,
                       std::shared_ptr<Clock> clock)
    : options_(Normalized(std::move(options))),
      runner_(std::move(runner)),
      clock_(std::move(clock)),
      http_(SettingsOf(options_), clock_, &cancelled_),
      skopeo_(SettingsOf(options_), runner_, clock_) {
  if (options_.dir.empty()) {
    init_status_ = absl::InvalidArgumentError("The image cache has no folder configured");
  } else if (options_.dir.find(':') != std::string::npos) {
    // skopeo's oci: and umoci's --image take "PATH:TAG"; a ':' in the path would be misread.
    init_status_ = absl::InvalidArgumentError(
        absl::StrCat("The image cache folder must not contain ':': ", options_.dir));
  } else {
    // Ranks run as their users' uids and read the unpacked roots: they may pass through the
    // cache to a root whose digest they were given, not list the cache or see pulls under way.
    init_status_.Update(MakePassThroughFolder(options_.dir));
    init_status_.Update(MakePassThroughFolder(options_.dir + "/bundles"));
    init_status_.Update(MakePrivateFolder(options_.dir + "/tmp"));
  }
  if (!init_status_.ok()) {
    spdlog::error("image cache: {}", std::string(init_status_.message()));
    return;
  }
  // What a crash left: half-done pulls and evicted images not yet deleted.
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(options_.dir + "/tmp", ec)) {
    removed += RemoveTree(entry.path().string()) ? 1 : 0;
  }
  if (removed > 0) {
    spdlog::info("image cache: removed {} leftovers in {}/tmp", removed, options_.dir);
  }
}

std::string ImageCache::BundlePath(const std::string& hex) const {
  return absl::StrCat(options_.dir, "/bundles/", hex);
}

std::string ImageCache::RegistryOf(const std::string& ref) const {
  auto parsed = ParseImageReference(ref, options_.default_registry);
  return parsed.ok() ? parsed->registry : "";
}

absl::StatusOr<PreparedImage> ImageCache::Acquire(
    const std::string& ref_text, const std::string& pinned_digest,
    const std::function<void(const std::string&)>& progress, const std::string& call_auth_file) {
  TESSERA_RETURN_IF_ERROR(init_status_);
  const std::string& auth_file = call_auth_file.empty() ? options_.auth_file : call_auth_file;
  TESSERA_ASSIGN_OR_RETURN(const ImageReference ref,
                           ParseImageReference(ref_text, options_.default_registry));
  const absl::Time deadline = clock_->Now() + options_.pull_timeout;
  TESSERA_ASSIGN_OR_RETURN(const std::string digest,
                           ResolveDigest(ref, pinned_digest, auth_file, deadline));
  const std::string hex = digest.substr(kDigestPrefix);

  std::shared_ptr<Pull> pull;
  bool mine = false;
  {
    absl::MutexLock lock(&mu_);
    if (fs::is_directory(BundlePath(hex))) {
      MarkInUse(hex);
    } else if (auto it = pulls_.find(hex); it != pulls_.end()) {
      pull = it->second;
      ++pull->waiters;
    } else {
      pull = std::make_shared<Pull>();
      pulls_[hex] = pull;
      mine = true;
    }
  }
  if (pull == nullptr) return Load(ref, digest, /*pulled=*/false);

  const auto tell = [&](const std::string& text) {
    if (progress) progress(text);
  };
  tell(absl::StrCat("Pulling image ", ref.Name()));
  const absl::Time start = clock_->Now();
  if (mine) {
    const absl::Status st = PullAndUnpack(ref, digest, auth_file, deadline);
    {
      absl::MutexLock lock(&mu_);
      pull->status = st;
      pull->done = true;
      pulls_.erase(hex);
      if (st.ok()) {
        MarkInUse(hex);
        in_use_[hex] += pull->waiters;  // theirs before anyone can evict it
      }
    }
    if (!st.ok()) return st;
    Evict();
  } else {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&pull->done));
    if (!pull->status.ok()) return pull->status;
  }
  tell(absl::StrFormat("Pulled image %s (%s) in %.1f s", ref.Name(), digest,
                       absl::ToDoubleSeconds(clock_->Now() - start)));
  return Load(ref, digest, /*pulled=*/true);
}

absl::StatusOr<std::string> ImageCache::ResolveDigest(const ImageReference& ref,
                                                      const std::string& pinned_digest,
                                                      const std::string& auth_file,
                                                      absl::Time deadline) {
  if (!pinned_digest.empty()) {
    if (!IsValidDigest(pinned_digest)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid pinned digest \"", absl::CHexEscape(pinned_digest), "\" for image ",
                       ref.Name(), ": it must be \"sha256:\" and 64 lower-case hex digits"));
    }
    if (!ref.digest.empty() && ref.digest != pinned_digest) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Image reference ", ref.Name(), " names another digest than the pinned ", pinned_digest));
    }
    return pinned_digest;
  }
  if (!ref.digest.empty()) return ref.digest;  // already exact: nothing to ask the registry

  return skopeo_.ResolveDigest(ref, auth_file, deadline);
}

absl::Status ImageCache::PullAndUnpack(const ImageReference& ref, const std::string& digest,
                                       const std::string& auth_file, absl::Time deadline) {
  const std::string hex = digest.substr(kDigestPrefix);
  const std::string work = absl::StrCat(options_.dir, "/tmp/", hex, "-", RandomSuffix());
  const std::string bundle = work + "-bundle";
  const auto clean_up = [&] {
    RemoveTree(work);
    RemoveTree(bundle);
  };
  ImageReference exact = ref;
  exact.digest = digest;  // copy exactly what was resolved, even if the tag moved since
  PullLimits limits;
  limits.max_image_bytes = options_.max_bytes;
  limits.max_files = options_.max_files;
  limits.min_free_bytes = options_.min_free_bytes;
  limits.min_free_inodes = options_.min_free_inodes;
  PullGuard guard(ref.Name(), options_.dir, limits);

  absl::Status st = MakePrivateFolder(work);
  st.Update(MakePrivateFolder(bundle));
  const auto make_root = [&] {
    // The image's root is readable by the ranks, as any root folder is.
    const std::string rootfs = bundle + "/rootfs";
    if (::mkdir(rootfs.c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat("Cannot create ", rootfs, ": ", strerror(errno)));
    }
    ::chmod(rootfs.c_str(), 0755);  // whatever the umask
    return absl::OkStatus();
  };
  if (st.ok()) st = make_root();
  bool by_skopeo = !options_.pull_over_http;
  const ImagePull pull{.ref = ref,
                       .exact = exact,
                       .auth_file = auth_file,
                       .work = work,
                       .bundle = bundle,
                       .deadline = deadline,
                       .guard = &guard};
  if (st.ok() && options_.pull_over_http) {
    st = http_.Pull(pull);
    if (st.code() == absl::StatusCode::kUnimplemented) {
      spdlog::info("image cache: {} is pulled by skopeo: {}", ref.Name(),
                   std::string(st.message()));
      by_skopeo = true;
      st = RemoveTree(bundle + "/rootfs") ? make_root()
                                          : absl::InternalError("Cannot empty " + bundle);
    }
  }
  if (st.ok() && by_skopeo) {
    st = skopeo_.Pull(pull);
  }
  if (!st.ok()) {
    clean_up();
    return st;
  }

  const int64_t bytes = TreeBytes(bundle);
  st = WriteNumberFile(bundle + "/tessera-size", bytes);
  st.Update(WriteNumberFile(bundle + "/tessera-last-used", absl::ToUnixNanos(clock_->Now())));
  // The rename is what makes the image appear, whole, in bundles/.
  if (st.ok() && std::rename(bundle.c_str(), BundlePath(hex).c_str()) != 0) {
    const int err = errno;
    if (!fs::is_directory(BundlePath(hex))) {  // there already (another process): also fine
      st = absl::InternalError(absl::StrCat("Cannot move the unpacked image ", ref.Name(), " to ",
                                            BundlePath(hex), ": ", std::strerror(err)));
    }
  }
  clean_up();
  if (!st.ok()) return st;
  spdlog::info("image cache: pulled {} ({}), {} bytes unpacked", ref.Name(), digest, bytes);
  return absl::OkStatus();
}

absl::StatusOr<PreparedImage> ImageCache::Load(const ImageReference& ref, const std::string& digest,
                                               bool pulled) {
  const std::string bundle = BundlePath(digest.substr(kDigestPrefix));
  absl::StatusOr<ProcessConfig> config = ReadProcessConfig(bundle);
  if (!config.ok()) {
    Release(digest);  // the caller gets no image, so it will not release it
    return absl::InternalError(
        absl::StrCat("Image ", ref.Name(), " is unusable: ", config.status().message()));
  }
  // umoci makes the bundle private; the root inside keeps the image's own modes.
  if (::chmod(bundle.c_str(), 0711) != 0) {
    const int err = errno;
    Release(digest);
    return absl::InternalError(
        absl::StrCat("Image ", ref.Name(), " cannot be opened to ranks: ", std::strerror(err)));
  }
  PreparedImage image;
  image.digest = digest;
  image.rootfs = bundle + "/rootfs";
  image.env = std::move(config->env);
  image.working_dir = std::move(config->cwd);
  image.pulled = pulled;
  return image;
}

void ImageCache::MarkInUse(const std::string& hex) {
  ++in_use_[hex];
  const std::string file = BundlePath(hex) + "/tessera-last-used";
  if (absl::Status st = WriteNumberFile(file, absl::ToUnixNanos(clock_->Now())); !st.ok()) {
    spdlog::warn("image cache: {}", std::string(st.message()));
  }
}

void ImageCache::Release(const std::string& digest) {
  absl::MutexLock lock(&mu_);
  const auto it =
      IsValidDigest(digest) ? in_use_.find(digest.substr(kDigestPrefix)) : in_use_.end();
  if (it == in_use_.end()) {
    spdlog::warn("image cache: release of image {}, which is not in use", digest);
    return;
  }
  if (--it->second <= 0) in_use_.erase(it);
}

std::vector<ImageCache::Bundle> ImageCache::ListBundles() const {
  std::vector<Bundle> bundles;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir + "/bundles", ec)) {
    const std::string hex = entry.path().filename().string();
    if (!IsValidDigest("sha256:" + hex)) continue;  // not ours
    const std::string path = entry.path().string();
    Bundle b{hex, 0, absl::InfinitePast()};
    b.bytes = ReadNumberFile(path + "/tessera-size").value_or(-1);
    if (b.bytes < 0) b.bytes = TreeBytes(path);
    if (auto ns = ReadNumberFile(path + "/tessera-last-used"))
      b.last_used = absl::FromUnixNanos(*ns);
    bundles.push_back(std::move(b));
  }
  return bundles;
}

int64_t ImageCache::Evict() {
  std::vector<std::string> doomed;
  int64_t freed = 0;
  int64_t total = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!init_status_.ok()) return 0;
    std::vector<Bundle> bundles = ListBundles();
    for (const Bundle& b : bundles) total += b.bytes;
    std::sort(bundles.begin(), bundles.end(), [](const Bundle& a, const Bundle& b) {
      return std::tie(a.last_used, a.hex) < std::tie(b.last_used, b.hex);
    });
    for (const Bundle& b : bundles) {
      if (total <= options_.max_bytes) break;
      if (in_use_.count(b.hex) > 0) continue;
      // Moved out under the lock (a rename is instant), deleted after it: a concurrent Acquire
      // then finds the image either whole or gone.
      const std::string to =
          absl::StrCat(options_.dir, "/tmp/evicted-", b.hex, "-", RandomSuffix());
      if (std::rename(BundlePath(b.hex).c_str(), to.c_str()) != 0) {
        spdlog::warn("image cache: cannot move {} out: {}", BundlePath(b.hex),
                     std::strerror(errno));
        continue;
      }
      doomed.push_back(to);
      total -= b.bytes;
      freed += b.bytes;
      spdlog::info("image cache: evicting sha256:{} ({} bytes)", b.hex, b.bytes);
    }
  }
  for (const std::string& path : doomed) RemoveTree(path);
  if (total > options_.max_bytes) {
    spdlog::warn("image cache: {} bytes of images in use, over the limit of {}", total,
                 options_.max_bytes);
  }
  return freed;
}

int64_t ImageCache::TotalBytes() {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const Bundle& b : ListBundles()) total += b.bytes;
  return total;
}

}  // namespace tessera::worker::image
