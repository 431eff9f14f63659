#include "worker/image/tar_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::worker::image {
namespace {

constexpr size_t kBlock = 512;
constexpr int64_t kMaxMeta = 1 << 20;  // a pax header or long name past 1 MiB is no real one

// A numeric field: octal digits (NUL or space ended), or GNU's base-256 for large values.
bool ParseNumber(const char* field, size_t size, int64_t* out) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    if (u[0] != 0x80) return false;  // negative base-256: no size or time of ours
    int64_t v = 0;
    for (size_t i = 1; i < size; ++i) {
      if (v > (INT64_MAX >> 8)) return false;
      v = (v << 8) | u[i];
    }
    *out = v;
    return true;
  }
  int64_t v = 0;
  size_t i = 0;
  while (i < size && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < size && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (INT64_MAX >> 3)) return false;
    v = v * 8 + (field[i] - '0');
    digits = true;
  }
  for (; i < size; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  *out = digits ? v : 0;
  return true;
}

std::string Field(const char* field, size_t size) {
  return std::string(field, strnlen(field, size));
}

bool ChecksumMatches(const char* block) {
  int64_t want = 0;
  if (!ParseNumber(block + 148, 8, &want)) return false;
  int64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
  }
  return sum == want;
}

}  // namespace

absl::Status TarStreamReader::Feed(const char* data, size_t size) {
  if (failed_) return status_;
  auto fail = [&](absl::Status st) {
    failed_ = true;
    status_ = st;
    return st;
  };
  while (size > 0) {
    switch (state_) {
      case State::kEnded:
        return absl::OkStatus();
      case State::kHeader: {
        const size_t n = std::min(size, kBlock - have_);
        std::memcpy(block_ + have_, data, n);
        have_ += n;
        data += n;
        size -= n;
        if (have_ == kBlock) {
          have_ = 0;
          if (absl::Status st = OnHeader(); !st.ok()) return fail(st);
        }
        break;
      }
      case State::kData:
      case State::kMeta: {
        const size_t n = static_cast<size_t>(std::min<int64_t>(left_, size));
        if (state_ == State::kData) {
          if (absl::Status st = handler_->Data(data, n); !st.ok()) return fail(st);
        } else {
          meta_.append(data, n);
        }
        left_ -= static_cast<int64_t>(n);
        data += n;
        size -= n;
        if (left_ == 0) {
          if (state_ == State::kData) {
            if (absl::Status st = handler_->End(); !st.ok()) return fail(st);
          } else if (absl::Status st = OnMetaDone(); !st.ok()) {
            return fail(st);
          }
          state_ = padding_ > 0 ? State::kPadding : State::kHeader;
        }
        break;
      }
      case State::kPadding: {
        const size_t n = static_cast<size_t>(std::min<int64_t>(padding_, size));
        padding_ -= static_cast<int64_t>(n);
        data += n;
        size -= n;
        if (padding_ == 0) state_ = State::kHeader;
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TarStreamReader::Finish() {
  if (failed_) return status_;
  // Some writers end without the two zero blocks; ending between entries is a whole archive.
  if (state_ == State::kEnded || (state_ == State::kHeader && have_ == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("the tar stream ended inside an entry");
}

absl::Status TarStreamReader::OnHeader() {
  if (std::all_of(block_, block_ + kBlock, [](char c) { return c == 0; })) {
    if (++zero_blocks_ == 2) state_ = State::kEnded;
    return absl::OkStatus();
  }
  zero_blocks_ = 0;
  if (!ChecksumMatches(block_)) {
    return absl::InvalidArgumentError("a tar header's checksum is wrong (not a tar stream?)");
  }
  int64_t size = 0, mode = 0, mtime = 0;
  if (!ParseNumber(block_ + 124, 12, &size) || !ParseNumber(block_ + 100, 8, &mode) ||
      !ParseNumber(block_ + 136, 12, &mtime)) {
    return absl::InvalidArgumentError("a tar header has a malformed number");
  }
  const char type = block_[156];
  if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
    if (size > kMaxMeta) {
      return absl::InvalidArgumentError(absl::StrCat("a tar extended header of ", size, " bytes"));
    }
    meta_type_ = type;
    meta_.clear();
    left_ = size;
    padding_ = (kBlock - size % kBlock) % kBlock;
    state_ = State::kMeta;
    if (size == 0) {
      state_ = padding_ > 0 ? State::kPadding : State::kHeader;
      return OnMetaDone();
    }
    return absl::OkStatus();
  }
  if (pax_size_ >= 0) size = pax_size_;

  TarEntry e;
  if (!long_path_.empty()) {
    e.path = long_path_;
  } else {
    e.path = Field(block_, 100);
    const std::string prefix = Field(block_ + 345, 155);
    if (std::memcmp(block_ + 257, "ustar", 5) == 0 && !prefix.empty() &&
        std::memcmp(block_ + 257, "ustar  ", 7) != 0) {  // old GNU uses the field otherwise
      e.path = prefix + "/" + e.path;
    }
  }
  e.link = long_link_.empty() ? Field(block_ + 157, 100) : long_link_;
  long_path_.clear();
  long_link_.clear();
  pax_size_ = -1;
  e.mode = static_cast<uint32_t>(mode & 07777);
  e.mtime = mtime;
  switch (type) {
    case '0':
    case '\0':
    case '7':
      e.type = TarEntry::Type::kFile;
      break;
    case '1':
      e.type = TarEntry::Type::kHardLink;
      break;
    case '2':
      e.type = TarEntry::Type::kSymlink;
      break;
    case '5':
      e.type = TarEntry::Type::kDirectory;
      break;
    default:
      e.type = TarEntry::Type::kOther;  // devices, fifos: data (if any) skipped
  }
  // Only a file's bytes are data; a directory or link's size field is meaningless.
  // A hard link's size may be its target's, with no data after it.
  const int64_t data = type == '1' ? 0 : size;
  e.size = e.type == TarEntry::Type::kFile ? data : 0;
  if (absl::Status st = handler_->Begin(e); !st.ok()) return st;
  padding_ = (kBlock - data % kBlock) % kBlock;
  if (data == 0 || e.type != TarEntry::Type::kFile) {
    if (absl::Status st = handler_->End(); !st.ok()) return st;
    // Data of anything but a file is skipped with the padding.
    padding_ += data;
    state_ = padding_ > 0 ? State::kPadding : State::kHeader;
    return absl::OkStatus();
  }
  left_ = data;
  state_ = State::kData;
  return absl::OkStatus();
}

absl::Status TarStreamReader::OnMetaDone() {
  if (meta_type_ == 'L' || meta_type_ == 'K') {
    (meta_type_ == 'L' ? long_path_ : long_link_) = std::string(meta_.c_str());  // NUL ended
    return absl::OkStatus();
  }
  if (meta_type_ == 'g') return absl::OkStatus();  // global: nothing we use
  // pax records: "LENGTH KEY=VALUE\n", LENGTH counting the whole record.
  size_t pos = 0;
  while (pos < meta_.size()) {
    const size_t space = meta_.find(' ', pos);
    int64_t length = 0;
    if (space == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(meta_).substr(pos, space - pos), &length) ||
        length <= 0 || pos + static_cast<size_t>(length) > meta_.size() ||
        static_cast<size_t>(length) <= space - pos + 1) {
      return absl::InvalidArgumentError("a malformed pax extended header");
    }
    const std::string record = meta_.substr(space + 1, pos + length - space - 2);
    pos += static_cast<size_t>(length);
    const size_t eq = record.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      long_path_ = value;
    } else if (key == "linkpath") {
      long_link_ = value;
    } else if (key == "size") {
      if (!absl::SimpleAtoi(value, &pax_size_) || pax_size_ < 0) {
        return absl::InvalidArgumentError("a pax header's size is malformed");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
