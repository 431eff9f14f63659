// The shell hub alone (mcli connect's meeting point): who may open a shell, where it opens, how
// bytes and the exit code travel, and how a session ends whichever side goes first; with fake
// streams and real threads, as the gRPC adapters give it.
#include "scheduler/service/shell_hub.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"

namespace tessera::scheduler {
namespace shell_hub_test {

// A queue one side writes and the other reads; Close ends the reads.
template <typename T>
class Pipe {
 public:
  void Push(T item) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(item));
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  bool Pop(T* out) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return false;
    *out = std::move(items_.front());
    items_.pop_front();
    return true;
  }
  std::vector<T> Drain() {
    std::lock_guard lock(mu_);
    return {items_.begin(), items_.end()};
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool closed_ = false;
};

struct FakeCaller final : ShellCallerEnd {
  Pipe<v1::ShellInput> in;    // what the caller sends
  Pipe<v1::ShellOutput> out;  // what it received
  std::atomic<bool> gone{false}, cancelled{false};
  bool Read(v1::ShellInput* m) override { return in.Pop(m); }
  bool Write(const v1::ShellOutput& m) override {
    out.Push(m);
    return true;
  }
  void Cancel() override {
    cancelled = true;
    in.Close();
  }
  bool Gone() override { return gone; }
};

struct FakeNode final : ShellNodeEnd {
  Pipe<v1::ShellNodeMessage> up;  // what the node sends
  Pipe<v1::ShellInput> down;      // what it received
  std::atomic<bool> cancelled{false};
  bool Read(v1::ShellNodeMessage* m) override { return up.Pop(m); }
  bool Write(const v1::ShellInput& m) override {
    down.Push(m);
    return true;
  }
  void Cancel() override {
    cancelled = true;
    up.Close();
  }
};

v1::ShellNodeMessage Output(const std::string& bytes) {
  v1::ShellNodeMessage m;
  m.mutable_output()->set_output(bytes);
  return m;
}
v1::ShellNodeMessage Exit(int code) {
  v1::ShellNodeMessage m;
  m.mutable_output()->set_exit_code(code);
  return m;
}

struct Hub {
  std::shared_ptr<AttemptTracker> attempts =
      std::make_shared<AttemptTracker>(std::make_shared<FakeClock>(), absl::Seconds(10));
  ShellHub hub{
      attempts,
      {.attach_timeout = absl::Seconds(2), .close_timeout = absl::Seconds(2), .max_sessions = 2},
      [n = 0]() mutable { return "s" + std::to_string(++n); }};
  Pipe<v1::ShellSessionStart> starts;  // what node-b's worker was told
  uint64_t listener = 0;

  Hub() {
    v1::Run run;
    run.set_id("run-1");
    run.set_name("train");
    run.set_user("alice");
    for (int i = 0; i < 2; ++i) {
      auto* n = run.add_nodes();
      n->set_node_name(i == 0 ? "node-a" : "node-b");
      n->set_node_rank(i);
    }
    attempts->SetActive({run});
    listener =
        hub.AddListener("node-b", [this](const v1::ShellSessionStart& s) { starts.Push(s); });
  }
  // The caller's Connect on a thread of its own.
  std::future<absl::Status> Connect(const auth::Principal& who, FakeCaller& caller,
                                    int node_rank = 1) {
    v1::ShellOpen open;
    open.set_run_name("train");
    open.set_node_rank(node_rank);
    open.set_command("ps");
    return std::async(std::launch::async,
                      [this, who, open, &caller] { return hub.Connect(who, open, caller); });
  }
};

const auth::Principal kAlice{"alice", v1::ROLE_USER};
const auth::Principal kBob{"bob", v1::ROLE_USER};
const auth::Principal kAdmin{"root", v1::ROLE_ADMIN};

TEST_CASE("shell hub: the owner's shell opens on the node of its rank, bytes and exit relayed") {
  Hub h;
  FakeCaller caller;
  auto done = h.Connect(kAlice, caller);
  v1::ShellSessionStart start;
  REQUIRE(h.starts.Pop(&start));
  CHECK(start.run_id() == "run-1");
  CHECK(start.open().command() == "ps");
  FakeNode node;
  auto attached = std::async(std::launch::async,
                             [&] { return h.hub.Attach("node-b", start.session_id(), node); });
  node.up.Push(Output(""));  // opened
  v1::ShellInput typed;
  typed.set_input("ls\n");
  caller.in.Push(typed);
  v1::ShellInput got;
  REQUIRE(node.down.Pop(&got));
  CHECK(got.input() == "ls\n");
  node.up.Push(Output("a b c\n"));
  node.up.Push(Exit(3));
  caller.in.Close();  // mcli half-closes once it has the exit code
  CHECK(done.get().ok());
  CHECK(attached.get().ok());
  std::vector<std::string> printed;
  int exit_code = -1;
  for (const auto& o : caller.out.Drain()) {
    if (o.has_output()) printed.push_back(o.output());
    if (o.has_exit_code()) exit_code = o.exit_code();
  }
  CHECK(printed == std::vector<std::string>{"", "a b c\n"});
  CHECK(exit_code == 3);
  CHECK_FALSE(node.cancelled);
  CHECK(h.hub.open_sessions() == 0);
}

TEST_CASE("shell hub: nobody but the owner and admins, and only on a node of the run") {
  Hub h;
  FakeCaller caller;
  const absl::Status bob = h.Connect(kBob, caller).get();
  CHECK(absl::IsPermissionDenied(bob));
  CHECK(bob.message() ==
        "only the owner of run train and admins may connect to it; bob is neither");
  const absl::Status rank = h.Connect(kAlice, caller, 5).get();
  CHECK(absl::IsInvalidArgument(rank));
  CHECK(rank.message() == "run train has no node rank 5 (its node ranks are 0 to 1)");
  // node-a's worker does not listen.
  CHECK(absl::IsUnavailable(h.Connect(kAdmin, caller, 0).get()));
  v1::ShellOpen other;
  other.set_run_name("nope");
  CHECK(absl::IsNotFound(h.hub.Connect(kAlice, other, caller)));
  CHECK(h.starts.Drain().empty());
}

TEST_CASE("shell hub: a node that never attaches, or refuses, ends the call with why") {
  Hub h;
  FakeCaller caller;
  const absl::Status late = h.Connect(kAdmin, caller).get();  // nobody attaches
  CHECK(absl::IsUnavailable(late));
  CHECK(late.message() == "node node-b did not open the shell within 2s");
  v1::ShellSessionStart start;
  REQUIRE(h.starts.Pop(&start));
  FakeNode stale;
  CHECK(absl::IsNotFound(h.hub.Attach("node-b", start.session_id(), stale)));

  auto refused = h.Connect(kAlice, caller);
  REQUIRE(h.starts.Pop(&start));
  FakeNode node;
  // Only the node the session is for may attach it.
  CHECK(absl::IsNotFound(h.hub.Attach("node-a", start.session_id(), node)));
  auto attached = std::async(std::launch::async,
                             [&] { return h.hub.Attach("node-b", start.session_id(), node); });
  v1::ShellNodeMessage no;
  no.set_refused("the run's container has ended");
  node.up.Push(no);
  const absl::Status st = refused.get();
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(st.message() == "node node-b could not open the shell: the run's container has ended");
  CHECK(attached.get().ok());
}

TEST_CASE("shell hub: a caller that goes takes its shell with it, and the run is not touched") {
  Hub h;
  FakeCaller caller;
  auto done = h.Connect(kAlice, caller);
  v1::ShellSessionStart start;
  REQUIRE(h.starts.Pop(&start));
  FakeNode node;
  auto attached = std::async(std::launch::async,
                             [&] { return h.hub.Attach("node-b", start.session_id(), node); });
  node.up.Push(Output(""));
  caller.gone = true;  // Ctrl-C of a non-interactive mcli, a dropped connection
  caller.in.Close();
  CHECK_FALSE(done.get().ok());
  CHECK(node.cancelled);
  CHECK(attached.get().ok());
  CHECK(h.hub.open_sessions() == 0);
}

TEST_CASE("shell hub: a node whose Listen stream ended takes no shells, a newer one replaces it") {
  Hub h;
  FakeCaller caller;
  const uint64_t newer =
      h.hub.AddListener("node-b", [&](const v1::ShellSessionStart& s) { h.starts.Push(s); });
  h.hub.RemoveListener("node-b", h.listener);  // the older stream's end removes nothing
  auto late = h.Connect(kAlice, caller);
  v1::ShellSessionStart start;
  REQUIRE(h.starts.Pop(&start));  // through the newer one
  CHECK(absl::IsUnavailable(late.get()));
  h.hub.RemoveListener("node-b", newer);
  const absl::Status gone = h.Connect(kAlice, caller).get();
  CHECK(absl::IsUnavailable(gone));
  CHECK(absl::StrContains(gone.message(), "node node-b takes no shells now"));
}

TEST_CASE("shell hub: sessions beyond the limit are refused, saying the limit") {
  Hub h;
  FakeCaller a, b, c;
  auto first = h.Connect(kAlice, a);
  auto second = h.Connect(kAlice, b);
  v1::ShellSessionStart s1, s2;
  REQUIRE(h.starts.Pop(&s1));
  REQUIRE(h.starts.Pop(&s2));
  const absl::Status third = h.Connect(kAlice, c).get();
  CHECK(absl::IsResourceExhausted(third));
  CHECK(third.message() == "this scheduler has 2 shells open, its limit; try again later");
  // Both time out unattached.
  CHECK(absl::IsUnavailable(first.get()));
  CHECK(absl::IsUnavailable(second.get()));
}

}  // namespace shell_hub_test
}  // namespace tessera::scheduler
