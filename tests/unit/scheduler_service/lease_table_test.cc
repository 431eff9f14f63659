#include "scheduler/service/lease_table.h"

#include <catch2/catch.hpp>

namespace tessera::scheduler {
namespace {

TEST_CASE("a lease lasts exactly its duration from the last renewal") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, absl::Seconds(3));
  leases.Grant("n1");
  clock->Advance(absl::Seconds(2));
  REQUIRE(leases.Renew("n1").ok());
  clock->Advance(absl::Milliseconds(2999));
  CHECK(leases.Holds("n1"));
  CHECK(leases.Expired().empty());
  clock->Advance(absl::Milliseconds(1));
  CHECK_FALSE(leases.Holds("n1"));
  auto expired = leases.Expired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].node == "n1");
  CHECK(expired[0].silent_for == absl::Seconds(3));
}

TEST_CASE("the time to the next lease's end counts live leases only") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, absl::Seconds(3));
  CHECK(leases.UntilNextExpiry() == absl::InfiniteDuration());
  leases.Grant("n1");
  clock->Advance(absl::Seconds(1));
  leases.Grant("n2");
  CHECK(leases.UntilNextExpiry() == absl::Seconds(2));
  clock->Advance(absl::Milliseconds(1500));
  REQUIRE(leases.Renew("n1").ok());  // n1 now ends at 5.5 s, n2 at 4 s
  CHECK(leases.UntilNextExpiry() == absl::Milliseconds(1500));
  clock->Advance(absl::Milliseconds(1500));
  // n2's lease has ended: the cycle's to declare, not a deadline ahead.
  CHECK(leases.UntilNextExpiry() == absl::Milliseconds(1500));
  leases.Revoke("n1");
  CHECK(leases.UntilNextExpiry() == absl::InfiniteDuration());
}

TEST_CASE("a revoked lease refuses renewals until the worker registers again") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, absl::Seconds(3));
  CHECK(absl::IsFailedPrecondition(leases.Renew("stranger")));
  leases.Grant("n1");
  clock->Advance(absl::Seconds(5));
  leases.Revoke("n1");
  CHECK(leases.Expired().empty());  // declared lost once, never again
  const absl::Status refused = leases.Renew("n1");
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK(refused.message().find("declared lost") != std::string::npos);
  leases.Grant("n1");
  CHECK(leases.Renew("n1").ok());
  CHECK(leases.Holds("n1"));
}

TEST_CASE("a new leader gives the online nodes a whole lease, and does not extend known ones") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, absl::Seconds(3));
  leases.Grant("n1");
  clock->Advance(absl::Seconds(2));
  leases.Adopt({"n1", "n2"});
  clock->Advance(absl::Seconds(1));
  // n1's lease ran from its grant; n2's from its adoption.
  auto expired = leases.Expired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].node == "n1");
  CHECK(leases.Holds("n2"));
  leases.Revoke("n1");
  leases.Adopt({"n1"});  // a node declared lost is not brought back by the store's old view
  CHECK_FALSE(leases.Holds("n1"));
}

}  // namespace
}  // namespace tessera::scheduler
