#include "tests/support/sse_followers.h"

#include <array>
#include <boost/asio.hpp>

#include "absl/strings/str_cat.h"

namespace tessera::testing {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {}  // namespace

struct SseFollowers::Follow {
  explicit Follow(net::io_context& io) : socket(io) {}
  tcp::socket socket;
  std::string request;
  std::array<char, 4096> buffer{};
  bool open = false;

  // Reads for ever; the first bytes with the event stream's type mean it is open.
  void Read(SseFollowers* set) {
    socket.async_read_some(
        net::buffer(buffer), [this, set](boost::system::error_code ec, size_t n) {
          if (ec) {
            ++set->ended_;
            if (open) --set->open_;
            return;
          }
          set->bytes_ += static_cast<int64_t>(n);
          if (!open && std::string_view(buffer.data(), n).find("text/event-stream") !=
                           std::string_view::npos) {
            open = true;
            ++set->open_;
          }
          Read(set);
        });
  }
};

struct SseFollowers::Impl {
  net::io_context io;
  std::vector<std::unique_ptr<Follow>> follows;
  std::thread thread;
};

SseFollowers::SseFollowers(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SseFollowers::~SseFollowers() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  for (auto& f : impl_->follows) {
    boost::system::error_code ignored;
    f->socket.close(ignored);
  }
}

absl::StatusOr<std::unique_ptr<SseFollowers>> SseFollowers::Open(int port, const std::string& path,
                                                                 const std::string& api_key,
                                                                 int count, int per_address,
                                                                 absl::Duration timeout) {
  auto impl = std::make_unique<Impl>();
  std::unique_ptr<SseFollowers> set(new SseFollowers(std::move(impl)));
  Impl& in = *set->impl_;
  auto guard = net::make_work_guard(in.io);
  for (int i = 0; i < count; ++i) {
    auto f = std::make_unique<Follow>(in.io);
    const std::string from = absl::StrCat("127.0.0.", 1 + i / std::max(1, per_address));
    boost::system::error_code ec;
    f->socket.open(tcp::v4(), ec);
    if (!ec) f->socket.bind(tcp::endpoint(net::ip::make_address(from), 0), ec);
    if (!ec) {
      f->socket.connect(
          tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)), ec);
    }
    if (ec) {
      return absl::UnavailableError(absl::StrCat("stream ", i, " from ", from, ": ", ec.message()));
    }
    f->request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ",
                              api_key, "\r\nAccept: text/event-stream\r\n\r\n");
    net::write(f->socket, net::buffer(f->request), ec);
    if (ec) return absl::UnavailableError(absl::StrCat("stream ", i, ": ", ec.message()));
    in.follows.push_back(std::move(f));
  }
  for (auto& f : in.follows) f->Read(set.get());
  in.thread = std::thread([&in, guard = std::move(guard)]() mutable { in.io.run(); });
  const absl::Time deadline = absl::Now() + timeout;
  while (set->open() + set->ended() < count && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (set->open() < count) {
    return absl::DeadlineExceededError(absl::StrCat(set->open(), " of ", count, " streams opened (",
                                                    set->ended(), " ended) within ",
                                                    absl::FormatDuration(timeout)));
  }
  return set;
}

}  // namespace tessera::testing
