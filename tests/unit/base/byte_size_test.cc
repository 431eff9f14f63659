#include "base/byte_size.h"

#include <catch2/catch.hpp>

namespace tessera {
namespace byte_size_test {

TEST_CASE("byte sizes take binary and decimal units, any case") {
  CHECK(*ParseByteSize("4096") == 4096);
  CHECK(*ParseByteSize("64MiB") == 64LL << 20);
  CHECK(*ParseByteSize("1gib") == 1LL << 30);
  CHECK(*ParseByteSize("2MB") == 2'000'000);
  CHECK(*ParseByteSize(" 8k ") == 8192);
  CHECK(*ParseByteSize("16b") == 16);
}

TEST_CASE("a bad byte size is an error that names the text") {
  for (const char* bad : {"", "MiB", "-1", "0", "1.5MiB", "12 apples", "2TiB", "2048GiB"}) {
    auto size = ParseByteSize(bad);
    INFO(bad);
    REQUIRE_FALSE(size.ok());
    CHECK(size.status().message().find(std::string("\"") + bad) != std::string::npos);
  }
}

TEST_CASE("byte size lists are comma separated and not empty") {
  auto sizes = ParseByteSizes("1MiB, 64MiB,1GiB");
  REQUIRE(sizes.ok());
  CHECK(*sizes == std::vector<int64_t>{1LL << 20, 64LL << 20, 1LL << 30});
  CHECK_FALSE(ParseByteSizes("").ok());
  CHECK_FALSE(ParseByteSizes("1MiB,nope").ok());
}

}  // namespace byte_size_test
}  // namespace tessera
