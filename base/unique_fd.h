#pragma once
// A file descriptor that closes itself.

#include <unistd.h>

namespace tessera {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Adopt(other.fd_);
    other.fd_ = -1;
    return *this;
  }

  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void Release() { fd_ = -1; }
  void Adopt(int fd) {
    Reset();
    fd_ = fd;
  }

 private:
  int fd_;
};

}  // namespace tessera
