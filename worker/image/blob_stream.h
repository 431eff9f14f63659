// The pieces a layer blob passes through on its way from the registry to the root folder, each
// fed as the bytes arrive: a SHA-256 (a blob is checked against its digest, a layer's
// uncompressed stream against its diff id) and a gzip inflater.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "worker/image/file_stream.h"

namespace tessera::worker::image {

class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(const char* data, size_t size);
  // "sha256:<64 hex>" of everything given; the stream is finished.
  std::string Digest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// "sha256:<hex>" of `data`.
std::string Sha256Digest(const std::string& data);

// Inflates a gzip stream (RFC 1952; several members one after another, as `pigz` and some
// image builders write, are one stream) into `sink`.
class GzipInflater {
 public:
  explicit GzipInflater(ByteSink sink);
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  // The next compressed bytes. INVALID_ARGUMENT for data that is not gzip; the sink's error as
  // it gave it. Any error is final.
  absl::Status Feed(const char* data, size_t size);
  // The compressed stream ended: INVALID_ARGUMENT if it ended inside a member.
  absl::Status Finish();
  int64_t bytes_out() const { return bytes_out_; }

 private:
  ByteSink sink_;
  z_stream z_{};
  bool in_member_ = false;  // inside a gzip member (its end not seen yet)
  bool failed_ = false;
  int64_t bytes_out_ = 0;
  std::string out_;
};

}  // namespace tessera::worker::image
