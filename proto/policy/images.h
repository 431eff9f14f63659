#pragma once
// What a run's `image` means where services must agree.

#include <string_view>

namespace tessera {

// No image, or `image: host`: the run runs on the nodes' own root file system (still in a
// sandbox), which only a cluster that allows it accepts.
inline bool IsHostImage(std::string_view image) { return image.empty() || image == "host"; }

}  // namespace tessera
