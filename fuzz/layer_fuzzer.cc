// Fuzzes the image layer unpacker (tar_stream.h, layer_writer.h, archive_unpacker.h) with
// layers as a hostile image could hold them: any input must be applied or refused with a status
// (never a crash or hang), and nothing may appear outside the root, whatever links, "..",
// absolute paths, whiteouts or malformed headers the input holds.

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "worker/image/archive_unpacker.h"
#include "worker/image/layer_writer.h"
#include "worker/image/tar_stream.h"

namespace {

namespace fs = std::filesystem;
using tessera::worker::image::ArchiveUnpacker;
using tessera::worker::image::FinishRoot;
using tessera::worker::image::LayerWriter;
using tessera::worker::image::RootFinish;
using tessera::worker::image::TarStreamReader;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "layer_fuzzer: %s\n", what.c_str());
  __builtin_trap();
}

// Feeds `data` in pieces whose size the first byte chooses (1 to 4096 bytes).
void Feed(TarStreamReader& reader, const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t chunk = 1 + (static_cast<size_t>(data[0]) * 16) % 4096;
  for (size_t i = 1; i < size; i += chunk) {
    if (!reader.Feed(reinterpret_cast<const char*>(data) + i, std::min(chunk, size - i)).ok()) {
      return;
    }
  }
  (void)reader.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char pattern[] = "/tmp/layer-fuzz-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) Fail("mkdtemp");
  const std::string base = pattern;
  fs::create_directories(base + "/root");
  fs::create_directories(base + "/spool");
  fs::create_directories(base + "/outside");
  const int root = ::open((base + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) Fail("open root");
  {
    // As one layer, then the same bytes as a docker-archive of two layers.
    RootFinish finish;
    LayerWriter writer(root, &finish);
    TarStreamReader reader(&writer);
    Feed(reader, data, size);
    (void)FinishRoot(root, finish);
    ArchiveUnpacker unpacker(root,
                             {"sha256:" + std::string(64, 'a'), "sha256:" + std::string(64, 'b')},
                             base + "/spool");
    TarStreamReader archive(&unpacker);
    Feed(archive, data, size);
    (void)unpacker.Finish();
  }
  ::close(root);
  std::error_code ec;
  int entries = 0;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name != "root" && name != "spool" && name != "outside")
      Fail("written beside the root: " + name);
    ++entries;
  }
  if (entries != 3 || !fs::is_empty(base + "/outside")) Fail("written outside the root");
  // Read-only folders of the layer: make them writable so that everything can go.
  for (auto it = fs::recursive_directory_iterator(base, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::remove_all(base, ec);
  return 0;
}
