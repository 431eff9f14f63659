#include "scheduler/service/lease_table.h"

#include <catch2/catch.hpp>

namespace tessera::scheduler {
namespace lease_table_test {

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

TEST_CASE("a node heard from is lost after the loss lease, an adopted one after the fence lease") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, LeaseTerms{.fence = absl::Seconds(10), .loss = absl::Seconds(3)});
  leases.Grant("heard");
  leases.Adopt({"heard", "adopted"});  // a new leader: "adopted" may be looking for it
  clock->Advance(absl::Milliseconds(2999));
  CHECK(leases.Expired().empty());
  CHECK(leases.UntilNextExpiry() == absl::Milliseconds(1));
  clock->Advance(absl::Milliseconds(1));
  auto expired = leases.Expired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].node == "heard");
  CHECK(leases.Holds("adopted"));
  // Its first beat here puts the adopted node on the loss lease too.
  REQUIRE(leases.Renew("adopted").ok());
  clock->Advance(absl::Seconds(3));
  expired = leases.Expired();
  REQUIRE(expired.size() == 2);  // by name
  CHECK(expired[0].node == "adopted");
  CHECK(expired[0].silent_for == absl::Seconds(3));
}

TEST_CASE("a node lost before its fence fired is unfenced until its last renewal plus the fence") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, LeaseTerms{.fence = absl::Seconds(10), .loss = absl::Seconds(3)});
  CHECK(leases.UntilFenced("stranger") == absl::ZeroDuration());
  leases.Grant("n1");
  clock->Advance(absl::Seconds(1));
  REQUIRE(leases.Renew("n1").ok());
  CHECK(leases.UntilFenced("n1") == absl::ZeroDuration());  // live: nothing to wait for
  clock->Advance(absl::Seconds(3));
  REQUIRE(leases.Expired().size() == 1);
  leases.Revoke("n1");
  // Its worker counts the lease from before its last renewal reached us: dead by 11 s.
  CHECK(leases.UntilFenced("n1") == absl::Seconds(7));
  clock->Advance(absl::Milliseconds(6999));
  CHECK(leases.UntilFenced("n1") == absl::Milliseconds(1));
  clock->Advance(absl::Milliseconds(1));
  CHECK(leases.UntilFenced("n1") == absl::ZeroDuration());
  leases.Grant("n1");
  CHECK(leases.UntilFenced("n1") == absl::ZeroDuration());
}

TEST_CASE("a node that missed one beat is suspected until it is heard again or lost") {
  auto clock = std::make_shared<FakeClock>();
  LeaseTable leases(clock, LeaseTerms{.fence = absl::Seconds(10),
                                      .loss = absl::Seconds(3),
                                      .suspect = absl::Milliseconds(1500)});
  leases.Grant("n1");
  leases.Grant("n2");
  leases.Adopt({"adopted"});
  clock->Advance(absl::Milliseconds(1499));
  CHECK(leases.Suspected().empty());
  REQUIRE(leases.Renew("n2").ok());
  clock->Advance(absl::Milliseconds(1));
  // A node adopted by a new leader has not missed a beat to it: only the heard one is suspect.
  CHECK(leases.Suspected() == std::vector<std::string>{"n1"});
  REQUIRE(leases.Renew("n1").ok());
  CHECK(leases.Suspected().empty());
  clock->Advance(absl::Seconds(3));
  // Both ended, not yet declared: still offered nothing.
  CHECK(leases.Suspected() == std::vector<std::string>{"n1", "n2"});
  leases.Revoke("n1");
  leases.Revoke("n2");
  CHECK(leases.Suspected().empty());
  clock->Advance(absl::Seconds(7));
  CHECK(leases.Suspected() == std::vector<std::string>{"adopted"});  // its fence lease ended
}

}  // namespace lease_table_test
}  // namespace tessera::scheduler
