#include "worker/image/http_image_puller.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "worker/image/cache_files.h"
#include "worker/image/image_config.h"
#include "worker/image/image_manifest.h"
#include "worker/image/layer_applier.h"
#include "worker/image/registry_client.h"

namespace tessera::worker::image {
namespace {

constexpr int64_t kMaxConfigBytes = 8 << 20;
constexpr size_t kParallelLayers = 3;  // downloads at once: the one applied and two ahead

// A layer downloading into a spool file while an earlier one is applied.
struct Prefetch {
  std::string path;
  absl::Status status;
  std::thread thread;
};

}  // namespace

HttpImagePuller::HttpImagePuller(PullSettings settings, std::shared_ptr<Clock> clock,
                                 const std::atomic<bool>* cancelled)
    : settings_(std::move(settings)), clock_(std::move(clock)), cancelled_(cancelled) {}

absl::StatusOr<RegistryCredentials> HttpImagePuller::CredentialsOf(const ImageReference& ref,
                                                                   const std::string& auth_file) {
  if (auth_file.empty()) return RegistryCredentials{};
  absl::StatusOr<std::string> text = ReadWholeFile(auth_file);
  if (!text.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cannot read the registry auth file: ", text.status().message()));
  }
  auto creds = CredentialsFor(*text, ref.registry, ref.repository);
  if (!creds.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot pull image ", ref.Name(), ": ", creds.status().message()));
  }
  return creds;
}

namespace {

// A registry's error in the words a user reads, naming the image and what was being fetched.
absl::Status PullError(const ImageReference& ref, const absl::Status& st, const std::string& what) {
  if (IsPullLimitError(st)) return st;  // its message names the image and the limit
  switch (st.code()) {
    case absl::StatusCode::kNotFound:
      return absl::NotFoundError(
          absl::StrCat("Image not found: ", ref.Name(), ": ", what, ": ", st.message()));
    case absl::StatusCode::kPermissionDenied:
      return absl::PermissionDeniedError(
          absl::StrCat("Not allowed to pull image ", ref.Name(), ": ", st.message()));
    case absl::StatusCode::kUnavailable:
      return absl::UnavailableError(
          absl::StrCat("Cannot reach the registry of ", ref.Name(), ": ", st.message()));
    case absl::StatusCode::kUnimplemented:
      return st;
    default:
      return absl::Status(st.code(), absl::StrCat("Cannot pull image ", ref.Name(), ": ", what,
                                                  ": ", st.message()));
  }
}

// The manifest of `digest`; for an index, this node's platform's. UNIMPLEMENTED for layers this
// path does not read.
absl::StatusOr<ParsedManifest> FetchManifest(RegistryClient& client, const ImageReference& ref,
                                             const std::string& digest) {
  const auto fetch = [&](const std::string& d) -> absl::StatusOr<ParsedManifest> {
    auto manifest = client.GetManifest(d);
    if (!manifest.ok()) return PullError(ref, manifest.status(), "manifest " + d);
    auto parsed = ParseManifest(manifest->body, manifest->media_type);
    if (!parsed.ok()) return PullError(ref, parsed.status(), "manifest " + d);
    return parsed;
  };
  auto parsed = fetch(digest);
  if (parsed.ok() && parsed->is_index) {
    auto chosen = ChoosePlatform(*parsed, "linux", HostArchitecture());
    if (!chosen.ok()) {
      return PullError(ref, absl::InvalidArgumentError(chosen.status().message()), "index");
    }
    parsed = fetch(chosen->digest);
    if (parsed.ok() && parsed->is_index) {
      return PullError(ref, absl::InvalidArgumentError("an index inside an index"), "index");
    }
  }
  if (!parsed.ok()) return parsed.status();
  for (const Descriptor& layer : parsed->layers) {
    if (CompressionOf(layer.media_type) == LayerCompression::kUnsupported || layer.has_urls) {
      return absl::UnimplementedError(
          absl::StrCat("layer ", layer.digest, " is ", layer.media_type));
    }
  }
  return parsed;
}

// What the manifest claims its layers weigh, checked before a byte of a layer comes; what
// arrives is counted as it comes (a layer past its declared size is stopped by StreamBlob, the
// disk by the guard).
absl::Status CheckDeclaredSizes(const ImageReference& ref, const ParsedManifest& manifest,
                                PullGuard& guard) {
  int64_t declared = 0;
  for (const Descriptor& layer : manifest.layers) {
    if (layer.size < 0) {  // the image spec requires it; without it a layer's bytes are unbounded
      return PullError(
          ref,
          absl::InvalidArgumentError(absl::StrCat("layer ", layer.digest, " declares no size")),
          "manifest");
    }
    // Saturating: a stranger's sizes may sum past what an int64_t holds.
    declared = layer.size > INT64_MAX - declared ? INT64_MAX : declared + layer.size;
  }
  return guard.CheckDeclared(declared);
}

// The config (environment, working folder, diff ids), checked against the manifest.
absl::StatusOr<ImageConfig> FetchConfig(RegistryClient& client, const ImageReference& ref,
                                        const ParsedManifest& manifest) {
  const std::string what = "config " + manifest.config.digest;
  auto text = client.GetBlob(manifest.config.digest, kMaxConfigBytes);
  if (!text.ok()) return PullError(ref, text.status(), what);
  auto config = ParseImageConfig(*text);
  if (!config.ok()) return PullError(ref, config.status(), what);
  if (config->diff_ids.size() != manifest.layers.size()) {
    return PullError(ref,
                     absl::InvalidArgumentError(absl::StrCat(
                         "the manifest lists ", manifest.layers.size(), " layers and the config ",
                         config->diff_ids.size(), " diff ids")),
                     "config");
  }
  return config;
}

// Starts downloading layer `i` into a spool file of `work`, on a thread of its own.
std::unique_ptr<Prefetch> StartPrefetch(RegistryClient& client, const Descriptor& layer,
                                        const std::string& work, size_t i, PullGuard* guard) {
  auto p = std::make_unique<Prefetch>();
  p->path = absl::StrCat(work, "/layer-", i);
  Prefetch* raw = p.get();
  raw->thread = std::thread([&client, raw, digest = layer.digest, size = layer.size, guard] {
    const int fd = ::open(raw->path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      raw->status = absl::InternalError(
          absl::StrCat("cannot create ", raw->path, ": ", std::strerror(errno)));
      return;
    }
    raw->status = client.StreamBlob(
        digest,
        [&](const char* data, size_t bytes) {
          absl::Status counted = guard->Wrote(static_cast<int64_t>(bytes));
          return counted.ok() ? WriteAll(fd, data, bytes) : counted;
        },
        size);
    ::close(fd);
  });
  return p;
}

}  // namespace

absl::Status HttpImagePuller::Pull(const ImagePull& pull) const {
  const ImageReference& ref = pull.ref;
  RegistryClientOptions options;
  options.insecure = settings_.IsInsecure(ref.registry);
  options.certs_dir = settings_.certs_dir;
  std::atomic<bool> stop{false};  // set when a layer fails: the downloads ahead are not needed
  options.stop_flags = {cancelled_, &stop};
  auto creds = CredentialsOf(ref, pull.auth_file);
  if (!creds.ok()) return creds.status();
  options.credentials = *creds;
  // The cache's clock may be a test's; transfers run on real time.
  RegistryClient client(ref, options, absl::Now() + (pull.deadline - clock_->Now()));

  auto manifest = FetchManifest(client, ref, pull.exact.digest);
  if (!manifest.ok()) return manifest.status();
  if (absl::Status st = CheckDeclaredSizes(ref, *manifest, *pull.guard); !st.ok()) return st;
  auto config = FetchConfig(client, ref, *manifest);
  if (!config.ok()) return config.status();
  if (absl::Status st = WriteFileDurably(pull.bundle + "/config.json", BundleConfigJson(*config));
      !st.ok()) {
    return st;
  }
  return ApplyLayers(client, pull, *manifest, *config, stop);
}

absl::Status HttpImagePuller::ApplyLayers(RegistryClient& client, const ImagePull& pull,
                                          const ParsedManifest& manifest, const ImageConfig& config,
                                          std::atomic<bool>& stop) const {
  const std::string rootfs = pull.bundle + "/rootfs";
  const int root_fd = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return absl::InternalError(absl::StrCat("open ", rootfs, ": ", std::strerror(errno)));
  }
  const size_t count = manifest.layers.size();
  std::vector<std::unique_ptr<Prefetch>> ahead(count);
  RootFinish finish;
  int64_t unpacked = 0;  // uncompressed bytes of the layers applied
  absl::Status st;
  for (size_t i = 0; i < count && st.ok(); ++i) {
    for (size_t j = i + 1; j < std::min(count, i + kParallelLayers); ++j) {
      if (ahead[j] == nullptr) {
        ahead[j] = StartPrefetch(client, manifest.layers[j], pull.work, j, pull.guard);
      }
    }
    const Descriptor& layer = manifest.layers[i];
    const std::string what = absl::StrCat("layer ", i, " (", layer.digest, ")");
    // An image that unpacks to more than the whole cache could never be kept.
    const int64_t budget = settings_.max_bytes - unpacked;
    LayerApplier applier(root_fd, &finish, CompressionOf(layer.media_type), config.diff_ids[i],
                         budget, pull.guard);
    if (ahead[i] == nullptr) {
      st = client.StreamBlob(
          layer.digest, [&](const char* data, size_t size) { return applier.Feed(data, size); },
          layer.size);
      if (st.ok()) st = applier.Finish();
    } else {
      ahead[i]->thread.join();
      st = ahead[i]->status;
      if (st.ok()) st = applier.ApplyFile(ahead[i]->path);
      ::unlink(ahead[i]->path.c_str());
    }
    unpacked += applier.bytes();
    if (applier.bytes() > budget) {
      st = PullLimitError(absl::StrCat(
          "Image ", pull.ref.Name(), " is larger than the node's image cache (",
          settings_.max_bytes, " bytes, --image-cache-size): ", what, ": ", st.message()));
    } else if (!st.ok()) {
      st = PullError(pull.ref, st, what);
    }
  }
  stop = true;  // the downloads ahead of a failed layer are not needed
  for (auto& p : ahead) {
    if (p != nullptr && p->thread.joinable()) p->thread.join();
  }
  if (st.ok()) st = FinishRoot(root_fd, finish);
  ::close(root_fd);
  return st;
}

}  // namespace tessera::worker::image
