#include "services/store/filters.h"

#include <catch2/catch.hpp>

namespace tessera::store {
namespace filters_test {

TEST_CASE("globs match like a shell", "[filters]") {
  CHECK(GlobMatches("train-*", "train-abc"));
  CHECK(GlobMatches("train-*", "train-"));
  CHECK_FALSE(GlobMatches("train-*", "xtrain-a"));
  CHECK(GlobMatches("*-a", "train-a"));
  CHECK(GlobMatches("t?ain", "train"));
  CHECK_FALSE(GlobMatches("t?ain", "tain"));
  CHECK(GlobMatches("*a*b*c", "xxaxxbxxc"));
  CHECK_FALSE(GlobMatches("*a*b*c", "xxaxxcxxb"));
  CHECK(GlobMatches("", ""));
  CHECK_FALSE(GlobMatches("", "a"));
  CHECK(GlobMatches("\\*", "*"));
  CHECK_FALSE(GlobMatches("\\*", "a"));
  CHECK(GlobMatches("a\\?", "a?"));
  // Pathological patterns stay fast (no exponential backtracking).
  CHECK_FALSE(GlobMatches("*a*a*a*a*a*a*a*a*b", std::string(5000, 'a')));
}

TEST_CASE("globs translate to SQL LIKE with escapes", "[filters]") {
  CHECK(GlobToSqlLike("train-*") == "train-%");
  CHECK(GlobToSqlLike("t?ain") == "t_ain");
  CHECK(GlobToSqlLike("50%_done") == "50\\%\\_done");
  CHECK(GlobToSqlLike("a\\*b") == "a*b");
  CHECK(GlobToSqlLike("back\\\\slash") == "back\\\\slash");
}

}  // namespace filters_test
}  // namespace tessera::store
