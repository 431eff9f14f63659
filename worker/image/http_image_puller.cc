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

absl::Status HttpImagePuller::Pull(const ImagePull& pull) const {
  const ImageReference& ref = pull.ref;
  const std::string& digest = pull.exact.digest;
  const std::string& work = pull.work;
  const std::string& bundle = pull.bundle;
  PullGuard* guard = pull.guard;
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
  const auto failed = [&](const absl::Status& st, const std::string& what) {
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
  };

  // The manifest; for an index, this node's platform's.
  const auto fetch = [&](const std::string& d) -> absl::StatusOr<ParsedManifest> {
    auto manifest = client.GetManifest(d);
    if (!manifest.ok()) return failed(manifest.status(), "manifest " + d);
    auto parsed = ParseManifest(manifest->body, manifest->media_type);
    if (!parsed.ok()) return failed(parsed.status(), "manifest " + d);
    return parsed;
  };
  auto parsed = fetch(digest);
  if (parsed.ok() && parsed->is_index) {
    auto chosen = ChoosePlatform(*parsed, "linux", HostArchitecture());
    if (!chosen.ok()) return failed(absl::InvalidArgumentError(chosen.status().message()), "index");
    parsed = fetch(chosen->digest);
    if (parsed.ok() && parsed->is_index) {
      return failed(absl::InvalidArgumentError("an index inside an index"), "index");
    }
  }
  if (!parsed.ok()) return parsed.status();
  for (const Descriptor& layer : parsed->layers) {
    if (CompressionOf(layer.media_type) == LayerCompression::kUnsupported || layer.has_urls) {
      return absl::UnimplementedError(
          absl::StrCat("layer ", layer.digest, " is ", layer.media_type));
    }
  }
  // What the manifest claims is checked before a byte of a layer comes; what arrives is counted
  // as it comes (a layer past its declared size is stopped by StreamBlob, the disk by the guard).
  int64_t declared = 0;
  for (const Descriptor& layer : parsed->layers) {
    if (layer.size < 0) {  // the image spec requires it; without it a layer's bytes are unbounded
      return failed(
          absl::InvalidArgumentError(absl::StrCat("layer ", layer.digest, " declares no size")),
          "manifest");
    }
    // Saturating: a stranger's sizes may sum past what an int64_t holds.
    declared = layer.size > INT64_MAX - declared ? INT64_MAX : declared + layer.size;
  }
  if (absl::Status st = guard->CheckDeclared(declared); !st.ok()) return st;

  // The config: environment, working folder, diff ids.
  auto config_text = client.GetBlob(parsed->config.digest, kMaxConfigBytes);
  if (!config_text.ok()) return failed(config_text.status(), "config " + parsed->config.digest);
  auto config = ParseImageConfig(*config_text);
  if (!config.ok()) return failed(config.status(), "config " + parsed->config.digest);
  if (config->diff_ids.size() != parsed->layers.size()) {
    return failed(absl::InvalidArgumentError(absl::StrCat(
                      "the manifest lists ", parsed->layers.size(), " layers and the config ",
                      config->diff_ids.size(), " diff ids")),
                  "config");
  }
  if (absl::Status st = WriteFileDurably(bundle + "/config.json", BundleConfigJson(*config));
      !st.ok()) {
    return st;
  }

  const std::string rootfs = bundle + "/rootfs";
  const int root_fd = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return absl::InternalError(absl::StrCat("open ", rootfs, ": ", std::strerror(errno)));
  }
  const size_t count = parsed->layers.size();
  std::vector<std::unique_ptr<Prefetch>> ahead(count);
  const auto start_prefetch = [&](size_t i) {
    auto p = std::make_unique<Prefetch>();
    p->path = absl::StrCat(work, "/layer-", i);
    Prefetch* raw = p.get();
    const std::string layer_digest = parsed->layers[i].digest;
    const int64_t layer_size = parsed->layers[i].size;
    raw->thread = std::thread([&client, raw, layer_digest, layer_size, guard] {
      const int fd = ::open(raw->path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) {
        raw->status = absl::InternalError(
            absl::StrCat("cannot create ", raw->path, ": ", std::strerror(errno)));
        return;
      }
      raw->status = client.StreamBlob(
          layer_digest,
          [&](const char* data, size_t size) {
            absl::Status counted = guard->Wrote(static_cast<int64_t>(size));
            return counted.ok() ? WriteAll(fd, data, size) : counted;
          },
          layer_size);
      ::close(fd);
    });
    ahead[i] = std::move(p);
  };

  RootFinish finish;
  int64_t unpacked = 0;  // uncompressed bytes of the layers applied
  absl::Status st;
  for (size_t i = 0; i < count && st.ok(); ++i) {
    for (size_t j = i + 1; j < std::min(count, i + kParallelLayers); ++j) {
      if (ahead[j] == nullptr) start_prefetch(j);
    }
    const Descriptor& layer = parsed->layers[i];
    const std::string what = absl::StrCat("layer ", i, " (", layer.digest, ")");
    // An image that unpacks to more than the whole cache could never be kept.
    const int64_t budget = settings_.max_bytes - unpacked;
    LayerApplier applier(root_fd, &finish, CompressionOf(layer.media_type), config->diff_ids[i],
                         budget, guard);
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
          "Image ", ref.Name(), " is larger than the node's image cache (", settings_.max_bytes,
          " bytes, --image-cache-size): ", what, ": ", st.message()));
    } else if (!st.ok()) {
      st = failed(st, what);
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
