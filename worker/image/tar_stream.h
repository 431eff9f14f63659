// A tar stream read as it arrives, in pieces of any size: the layers of an image and the
// docker-archive stream skopeo writes them into (ustar headers, GNU long names, pax extended
// headers). It never buffers an entry's data: each piece goes to the handler as it comes, so an
// image is unpacked while it is still being downloaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace tessera::worker::image {

struct TarEntry {
  enum class Type { kFile, kHardLink, kSymlink, kDirectory, kOther };
  std::string path;  // as written: relative, maybe "./x", maybe with a trailing '/'
  std::string link;  // kHardLink, kSymlink: the target
  Type type = Type::kFile;
  int64_t size = 0;  // bytes of data (kFile)
  uint32_t mode = 0644;
  int64_t mtime = 0;  // seconds since the epoch
};

class TarHandler {
 public:
  virtual ~TarHandler() = default;
  virtual absl::Status Begin(const TarEntry& entry) = 0;
  virtual absl::Status Data(const char* data, size_t size) = 0;  // kFile only
  virtual absl::Status End() = 0;
};

class TarStreamReader {
 public:
  explicit TarStreamReader(TarHandler* handler) : handler_(handler) {}

  // The next bytes of the stream. An error (a malformed header, the handler's) is final.
  absl::Status Feed(const char* data, size_t size);
  // The stream ended: INVALID_ARGUMENT if it ended inside an entry.
  absl::Status Finish();
  // Whether the end-of-archive blocks were seen (bytes after them are ignored).
  bool ended() const { return state_ == State::kEnded; }

 private:
  enum class State { kHeader, kData, kMeta, kPadding, kEnded };
  absl::Status OnHeader();
  absl::Status OnMetaDone();

  TarHandler* handler_;
  State state_ = State::kHeader;
  char block_[512] = {};
  size_t have_ = 0;        // bytes of block_ filled (kHeader)
  int64_t left_ = 0;       // data bytes left of the entry (kData, kMeta)
  int64_t padding_ = 0;    // bytes to skip after the data (kPadding)
  char meta_type_ = 0;     // 'x', 'g', 'L' or 'K' (kMeta)
  std::string meta_;       // that entry's data
  std::string long_path_;  // from 'L' or a pax "path", for the next entry
  std::string long_link_;  // from 'K' or a pax "linkpath"
  int64_t pax_size_ = -1;  // from a pax "size"
  int zero_blocks_ = 0;
  bool failed_ = false;
  absl::Status status_;
};

}  // namespace tessera::worker::image
