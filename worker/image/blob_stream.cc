#include "worker/image/blob_stream.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::worker::image {
namespace {

constexpr size_t kOutChunk = 256 << 10;

}  // namespace

struct Sha256Stream::Context {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256Stream::Sha256Stream() : context_(std::make_unique<Context>()) {
  EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr);
}

Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Update(const char* data, size_t size) {
  EVP_DigestUpdate(context_->ctx, data, size);
}

std::string Sha256Stream::Digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->ctx, md, &length);
  return absl::StrCat(
      "sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), length)));
}

std::string Sha256Digest(const std::string& data) {
  Sha256Stream sha;
  sha.Update(data.data(), data.size());
  return sha.Digest();
}

GzipInflater::GzipInflater(ByteSink sink) : sink_(std::move(sink)), out_(kOutChunk, '\0') {
  // 16 + MAX_WBITS: gzip framing only (a layer is never zlib or raw deflate).
  if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) failed_ = true;
}

GzipInflater::~GzipInflater() { inflateEnd(&z_); }

absl::Status GzipInflater::Feed(const char* data, size_t size) {
  if (failed_) return absl::FailedPreconditionError("the gzip stream failed already");
  z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z_.avail_in = static_cast<uInt>(size);
  while (z_.avail_in > 0) {
    if (!in_member_) {
      // A new member begins; bytes after the last member must be another member.
      inflateReset(&z_);
      in_member_ = true;
    }
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    const int rc = inflate(&z_, Z_NO_FLUSH);
    const size_t produced = out_.size() - z_.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      failed_ = true;
      return absl::InvalidArgumentError(
          absl::StrCat("not a valid gzip stream: ", z_.msg != nullptr ? z_.msg : "error ", rc));
    }
    if (produced > 0) {
      bytes_out_ += static_cast<int64_t>(produced);
      if (absl::Status st = sink_(out_.data(), produced); !st.ok()) {
        failed_ = true;
        return st;
      }
    }
    if (rc == Z_STREAM_END) in_member_ = false;
    if (rc == Z_BUF_ERROR && produced == 0 && z_.avail_in > 0) {
      failed_ = true;
      return absl::InvalidArgumentError("not a valid gzip stream: no progress");
    }
  }
  return absl::OkStatus();
}

absl::Status GzipInflater::Finish() {
  if (failed_) return absl::FailedPreconditionError("the gzip stream failed already");
  if (in_member_) return absl::InvalidArgumentError("the gzip stream ended inside a member");
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
