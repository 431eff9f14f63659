// The pull by skopeo: the image's config (skopeo inspect --config), then the image streamed by
// skopeo copy, as a docker-archive through a pipe, into the root folder as it downloads
// (archive_unpacker.h). Also a tag's digest, asked of the registry (skopeo inspect). skopeo says
// what went wrong only in words: each failure is turned into the status that means it.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "worker/image/image_config.h"
#include "worker/image/image_pull.h"
#include "worker/image/tool_runner.h"

namespace tessera::worker::image {

class SkopeoImagePuller {
 public:
  SkopeoImagePuller(PullSettings settings, std::shared_ptr<ToolRunner> runner,
                    std::shared_ptr<Clock> clock);

  // The digest the registry gives `ref`'s tag now.
  absl::StatusOr<std::string> ResolveDigest(const ImageReference& ref, const std::string& auth_file,
                                            absl::Time deadline) const;
  absl::Status Pull(const ImagePull& pull) const;

 private:
  // skopeo copy into a pipe in the pull's work folder, each layer applied to the root as it
  // arrives.
  absl::Status StreamIntoRoot(const ImagePull& pull, const ImageConfig& config) const;
  // skopeo inspect `what` of `ref`, with the registry's TLS and auth flags.
  std::vector<std::string> InspectCommand(std::initializer_list<std::string> what,
                                          const ImageReference& ref,
                                          const std::string& auth_file) const;
  // Runs a tool with what is left of the pull's time; the runner's errors name the image.
  // `keep_going`: see ToolRunner::RunWatched.
  absl::StatusOr<ToolResult> RunTool(
      const ImageReference& ref, const std::vector<std::string>& argv, absl::Time deadline,
      const std::function<absl::Status()>& keep_going = nullptr) const;

  const PullSettings settings_;
  const std::shared_ptr<ToolRunner> runner_;
  const std::shared_ptr<Clock> clock_;
};

}  // namespace tessera::worker::image
