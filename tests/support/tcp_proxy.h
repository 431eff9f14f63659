#pragma once
// A loopback TCP proxy for tests that cut a network path: it forwards every connection to a
// target port until Cut(), after which it forwards nothing and accepts nothing (packets vanish,
// as on a partitioned network: no reset, no close), until Restore() drops the stalled
// connections so that clients reconnect.

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  int port() const { return port_; }
  void Cut();
  void Restore();

 private:
  void AcceptLoop();
  void Pump(int client, int upstream);

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false}, cut_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

}  // namespace tessera::testing
