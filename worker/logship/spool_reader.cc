#include "worker/logship/spool_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tessera::worker {

SpoolReader::SpoolReader(std::string path, SpoolPosition start)
    : path_(std::move(path)), pos_(start), buf_start_(start.offset) {}

SpoolReader::~SpoolReader() {
  if (fd_ >= 0) ::close(fd_);
}

void SpoolReader::Rewind(SpoolPosition p) {
  pos_ = p;
  buf_.clear();
  buf_start_ = p.offset;
}

absl::Status SpoolReader::Read(size_t max_lines, size_t max_bytes, bool final,
                               std::vector<SpoolLine>& out) {
  if (fd_ < 0) {
    // The rank may replace its output file with a link (to /dev/zero, another user's file) or a
    // FIFO: only the regular file itself is shipped, never what a link points at.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd_ < 0) {
      if (errno == ENOENT) return absl::OkStatus();
      return absl::InternalError(absl::StrCat("opening ", path_, ": ", strerror(errno)));
    }
    struct stat st;
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fd_ = -1;
      return absl::FailedPreconditionError(
          absl::StrCat(path_, " is not a regular file: its lines are not shipped"));
    }
  }
  // Fill the buffer with what follows it in the file.
  char chunk[64 * 1024];
  // Always room for one whole line, however small max_bytes is.
  const size_t want = std::max(max_bytes, kMaxLine + 1);
  while (buf_.size() < want) {
    const ssize_t n =
        ::pread(fd_, chunk, sizeof chunk, buf_start_ + static_cast<int64_t>(buf_.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("reading ", path_, ": ", strerror(errno)));
    }
    if (n == 0) break;
    buf_.append(chunk, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof chunk) break;
  }
  size_t start = 0, emitted = 0, bytes = 0;
  while (emitted < max_lines && bytes < max_bytes && start < buf_.size()) {
    const size_t nl = buf_.find('\n', start);
    size_t end, next;
    if (nl != std::string::npos && nl - start <= kMaxLine) {
      end = nl;
      next = nl + 1;
    } else if (buf_.size() - start >= kMaxLine) {
      end = next = start + kMaxLine;  // an over-long line: cut it
    } else if (final) {
      end = next = buf_.size();  // the writer is gone: its last line has no newline
    } else {
      break;  // wait for the rest of the line
    }
    pos_.offset = buf_start_ + static_cast<int64_t>(next);
    ++pos_.sequence;
    out.push_back({buf_.substr(start, end - start), pos_});
    bytes += end - start;
    ++emitted;
    start = next;
  }
  buf_.erase(0, start);
  buf_start_ = pos_.offset;
  return absl::OkStatus();
}

bool SpoolReader::AtEnd(bool final) {
  if (!final) return false;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return errno == ENOENT;
  return pos_.offset >= st.st_size;
}

AckState LoadAckState(const std::string& spool_path) {
  AckState s;
  std::ifstream in(spool_path + ".acked");
  std::string word;
  if (in >> s.acked.offset >> s.acked.sequence) {
    if (in >> word) s.done = word == "done";
  } else {
    s = AckState{};
  }
  return s;
}

absl::Status SaveAckState(const std::string& spool_path, const AckState& state) {
  const std::string path = spool_path + ".acked";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << state.acked.offset << ' ' << state.acked.sequence << (state.done ? " done" : "") << '\n';
    if (!out) return absl::InternalError(absl::StrCat("writing ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("renaming ", tmp, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
