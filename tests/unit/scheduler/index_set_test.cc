#include "scheduler/placement/index_set.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

namespace tessera::scheduler {
namespace index_set_test {

TEST_CASE("IndexSet: insert, erase and ordered iteration", "[placement][index_set]") {
  IndexSet set(300);
  CHECK(set.empty());
  CHECK(set.First() == IndexSet::kNone);
  CHECK(set.Insert(5));
  CHECK_FALSE(set.Insert(5));
  CHECK(set.Insert(64));
  CHECK(set.Insert(299));
  CHECK(set.size() == 3);
  CHECK(set.First() == 5);
  CHECK(set.Next(6) == 64);
  CHECK(set.Next(65) == 299);
  CHECK(set.Next(300) == IndexSet::kNone);
  CHECK(set.Erase(64));
  CHECK_FALSE(set.Erase(64));
  CHECK(set.Next(6) == 299);
  CHECK(set.Contains(5));
  CHECK_FALSE(set.Contains(64));
}

TEST_CASE("IndexSet: agrees with std::set over random operations", "[placement][index_set]") {
  for (uint32_t capacity : {1u, 63u, 64u, 65u, 4096u, 5000u, 300000u}) {
    IndexSet set(capacity);
    std::set<uint32_t> reference;
    std::mt19937 random(capacity);
    std::uniform_int_distribution<uint32_t> pick(0, capacity - 1);
    for (int step = 0; step < 4000; ++step) {
      const uint32_t value = pick(random);
      if (random() % 3 == 0) {
        CHECK(set.Erase(value) == (reference.erase(value) == 1));
      } else {
        CHECK(set.Insert(value) == reference.insert(value).second);
      }
      const uint32_t from = pick(random);
      auto it = reference.lower_bound(from);
      REQUIRE(set.Next(from) == (it == reference.end() ? IndexSet::kNone : *it));
    }
    REQUIRE(set.size() == reference.size());
    uint32_t count = 0;
    for (uint32_t i = set.First(); i != IndexSet::kNone; i = set.Next(i + 1)) {
      REQUIRE(reference.count(i) == 1);
      ++count;
    }
    CHECK(count == reference.size());
  }
}

}  // namespace index_set_test
}  // namespace tessera::scheduler
