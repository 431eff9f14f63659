// The progress bar, the plain progress line, the time left, the status line kept under the
// output, and the ticker that feeds it while a run is followed.

#include <algorithm>
#include <catch2/catch.hpp>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "base/timestamps.h"
#include "cli/progress_ticker.h"
#include "cli/progress_view.h"
#include "cli/status_line.h"

namespace tessera::cli {
namespace progress_test {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

tessera::v1::RunProgress Progress(int64_t step, int64_t total, absl::Time at) {
  tessera::v1::RunProgress p;
  p.set_step(step);
  p.set_total_steps(total);
  p.set_loss(2.34567);
  p.set_tokens_per_second(5120.4);
  p.set_mfu(0.41);
  *p.mutable_reported_at() = ToProtoTime(at);
  return p;
}

TEST_CASE("the time left follows the pace since the origin", "[cli][progress]") {
  // 100 steps in 50 s since step 100: 800 left take 400 s.
  auto left = EstimateRemaining(Progress(200, 1000, kStart + absl::Seconds(50)), {100, kStart});
  REQUIRE(left);
  CHECK(*left == absl::Seconds(400));
  CHECK(*EstimateRemaining(Progress(1000, 1000, kStart + absl::Seconds(9)), {0, kStart}) ==
        absl::ZeroDuration());
  // No estimate: no total, no step made, no time passed, a report from before the origin.
  CHECK_FALSE(EstimateRemaining(Progress(200, 0, kStart + absl::Seconds(5)), {0, kStart}));
  CHECK_FALSE(EstimateRemaining(Progress(100, 1000, kStart + absl::Seconds(5)), {100, kStart}));
  CHECK_FALSE(EstimateRemaining(Progress(200, 1000, kStart), {100, kStart}));
  tessera::v1::RunProgress unreported = Progress(200, 1000, kStart);
  unreported.clear_reported_at();
  CHECK_FALSE(EstimateRemaining(unreported, {0, kStart - absl::Seconds(1)}));
}

TEST_CASE("a bar fits its width and a plain line says the same in words", "[cli][progress]") {
  const auto p = Progress(120, 1000, kStart);
  const std::string bar = FormatProgressBar(p, absl::Minutes(62), 100);
  CHECK(bar.size() <= 100);
  CHECK_THAT(bar, Catch::StartsWith("[####") &&
                      Catch::EndsWith("] 120/1000 12% | loss 2.3457 | 5120 tokens/s | ETA 1h 2m"));
  const std::string narrow = FormatProgressBar(p, std::nullopt, 70);
  CHECK(narrow.size() <= 70);
  CHECK_THAT(narrow, Catch::EndsWith("| ETA -"));
  // Too narrow for a bar: the figures alone; no total: no bar and no ETA.
  CHECK(FormatProgressBar(p, std::nullopt, 40) ==
        "120/1000 12% | loss 2.3457 | 5120 tokens/s | ETA -");
  CHECK(FormatProgressBar(Progress(7, 0, kStart), std::nullopt, 100) ==
        "7 | loss 2.3457 | 5120 tokens/s");
  // 12% of 40 cells.
  const std::string wide = FormatProgressBar(p, absl::Seconds(5), 200);
  CHECK(wide.substr(0, 42) == "[####" + std::string(40 - 4, '.') + "]");

  CHECK(FormatProgressLine(p, absl::Seconds(3725)) ==
        "step 120/1000 (12%), loss 2.3457, 5120 tokens/s, MFU 41.0%, ETA 1h 2m");
  CHECK(FormatProgressLine(Progress(7, 0, kStart), std::nullopt) ==
        "step 7, loss 2.3457, 5120 tokens/s, MFU 41.0%");
}

TEST_CASE("on a terminal the status is redrawn under what is printed", "[cli][progress]") {
  std::ostringstream out;
  {
    StatusLine line(out, /*terminal=*/true);
    line.Show("bar 1");
    {
      StatusLine::Hold hold(&line);
      out << "log a\n";
    }
    line.Show("bar 2");
  }  // cleared when it goes
  CHECK(out.str() == "\r\033[Kbar 1\r\033[Klog a\nbar 1\r\033[Kbar 2\r\033[K");

  std::ostringstream plain;
  {
    StatusLine line(plain, /*terminal=*/false);
    line.Show("status 1");
    {
      StatusLine::Hold hold(&line);
      plain << "log a\n";
    }
    StatusLine::Hold none(nullptr);  // holding no line is allowed
  }
  CHECK(plain.str() == "status 1\nlog a\n");
}

// A source the test moves on: each call answers the progress set last.
struct FakeSource {
  std::mutex mu;
  std::optional<tessera::v1::RunProgress> progress;
  int calls = 0;
  ProgressTicker::Source Get() {
    return [this]() {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      return progress;
    };
  }
  void Set(std::optional<tessera::v1::RunProgress> p) {
    std::lock_guard<std::mutex> lock(mu);
    progress = std::move(p);
  }
  int Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  void WaitForCalls(int n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (Calls() < n && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    REQUIRE(Calls() >= n);
  }
};

TEST_CASE("the ticker draws each new report with the time left from the first", "[cli][progress]") {
  std::ostringstream out;
  FakeSource source;
  source.Set(Progress(100, 1000, kStart));
  {
    StatusLine line(out, /*terminal=*/true);
    ProgressTicker ticker(line, source.Get(), 100, absl::Milliseconds(1), absl::Seconds(30));
    source.WaitForCalls(3);  // the same report again: drawn once
    source.Set(Progress(200, 1000, kStart + absl::Seconds(10)));
    source.WaitForCalls(6);
    source.Set(std::nullopt);  // a failed read: nothing drawn
    source.WaitForCalls(9);
  }
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("100/1000 10% | loss 2.3457 | 5120 tokens/s | ETA -"));
  // 100 steps in 10 s: 800 left take 80 s.
  CHECK_THAT(text, Catch::Contains("200/1000 20% | loss 2.3457 | 5120 tokens/s | ETA 1m 20s"));
  size_t draws = 0;
  for (size_t at = text.find("ETA -"); at != std::string::npos; at = text.find("ETA -", at + 1)) {
    ++draws;
  }
  CHECK(draws == 1);
  CHECK_THAT(text, Catch::EndsWith("\r\033[K"));  // no bar left behind
}

TEST_CASE("without a terminal the ticker prints a line when the step moved and not more often",
          "[cli][progress]") {
  std::ostringstream out;
  FakeSource source;
  source.Set(Progress(100, 1000, kStart));
  {
    StatusLine line(out, /*terminal=*/false);
    ProgressTicker ticker(line, source.Get(), 0, absl::Milliseconds(1), absl::Hours(1));
    source.WaitForCalls(2);
    source.Set(Progress(200, 1000, kStart + absl::Seconds(10)));  // within the hour: not shown
    source.WaitForCalls(5);
  }
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find('\r') == std::string::npos);
  CHECK_THAT(text, Catch::Contains("  PROGRESS  step 100/1000 (10%), loss 2.3457, 5120 tokens/s, "
                                   "MFU 41.0%, ETA -\n"));
  CHECK(text.find("step 200") == std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

}  // namespace progress_test
}  // namespace tessera::cli
