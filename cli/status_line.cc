#include "cli/status_line.h"

namespace tessera::cli {

namespace {
// Back to the line's start, then erase to its end (ECMA-48 EL).
constexpr const char* kEraseLine = "\r\033[K";
}  // namespace

void StatusLine::EraseLocked() {
  if (terminal_ && !shown_.empty()) out_ << kEraseLine;
}

void StatusLine::Show(const std::string& text) {
  absl::MutexLock lock(&mu_);
  if (!terminal_) {
    out_ << text << "\n";
  } else {
    out_ << kEraseLine << text;
    shown_ = text;
  }
  out_.flush();
}

void StatusLine::Clear() {
  absl::MutexLock lock(&mu_);
  EraseLocked();
  shown_.clear();
  out_.flush();
}

StatusLine::Hold::Hold(StatusLine* line) : line_(line) {
  if (!line_) return;
  line_->mu_.Lock();
  line_->EraseLocked();
}

StatusLine::Hold::~Hold() {
  if (!line_) return;
  if (line_->terminal_ && !line_->shown_.empty()) line_->out_ << line_->shown_;
  line_->out_.flush();
  line_->mu_.Unlock();
}

}  // namespace tessera::cli
