#include "worker/engine/data/tokenizer.h"

#include <catch2/catch.hpp>

namespace tessera::engine {
namespace tokenizer_test {

const char* kText =
    "The licence grants you the right to copy, modify and distribute the software. "
    "The licence requires that the licence text is kept with every copy of the software.\n\n"
    "Copyright 2024, 2025 the authors; all rights reserved.\tUTF-8: d\xc3\xa9j\xc3\xa0 vu.";

TEST_CASE("pre-tokenization splits words, numbers and symbols and loses nothing") {
  const auto pieces = PreTokenize(kText);
  std::string joined;
  for (auto piece : pieces) joined += piece;
  CHECK(joined == kText);
  CHECK(pieces[0] == "The");
  CHECK(pieces[1] == " licence");
  CHECK(std::find(pieces.begin(), pieces.end(), " 2024") != pieces.end());
  CHECK(std::find(pieces.begin(), pieces.end(), "\n\n") != pieces.end());
  CHECK(PreTokenize("a   b") == std::vector<std::string_view>{"a", "  ", " b"});
  CHECK(PreTokenize("").empty());
}

TEST_CASE("the byte tokenizer maps every byte to itself and reserves end-of-document") {
  auto t = MakeByteTokenizer();
  CHECK(t->vocab_size() == 257);
  CHECK(t->eos_id() == 256);
  const auto ids = t->Encode("h\xff");
  CHECK(ids == std::vector<uint32_t>{'h', 255});
  CHECK(t->Decode(ids) == "h\xff");
}

TEST_CASE("BPE learns frequent pairs, round-trips any text and is deterministic") {
  auto trained = TrainBpeTokenizer({kText, kText}, 300);
  REQUIRE(trained.ok());
  auto& t = **trained;
  CHECK(t.kind() == "bpe");
  CHECK(t.vocab_size() > 257);
  CHECK(t.vocab_size() <= 300);
  const auto ids = t.Encode(kText);
  CHECK(ids.size() < std::string(kText).size() * 3 / 4);  // merges compress the corpus
  CHECK(t.Decode(ids) == kText);
  // Text it never saw still round-trips (falls back to bytes).
  const std::string unseen = "zebra \x01\x02 quux 999";
  CHECK(t.Decode(t.Encode(unseen)) == unseen);
  // The same corpus trains the same merges.
  auto again = TrainBpeTokenizer({kText, kText}, 300);
  REQUIRE(again.ok());
  CHECK((*again)->ToJson() == t.ToJson());
  // " licence" is frequent enough to become one token.
  CHECK(t.Encode(" licence").size() == 1);
}

TEST_CASE("a saved tokenizer loads back and encodes the same") {
  auto trained = TrainBpeTokenizer({kText}, 280);
  REQUIRE(trained.ok());
  auto loaded = TokenizerFromJson((*trained)->ToJson());
  REQUIRE(loaded.ok());
  CHECK((*loaded)->Encode(kText) == (*trained)->Encode(kText));
  auto byte = TokenizerFromJson(MakeByteTokenizer()->ToJson());
  REQUIRE(byte.ok());
  CHECK((*byte)->kind() == "byte");
}

TEST_CASE("bad tokenizer files and sizes are refused with the field named") {
  CHECK(TrainBpeTokenizer({kText}, 100).status().message().find("vocab_size") != std::string::npos);
  CHECK(TokenizerFromJson({{"kind", "wordpiece"}}).status().message() ==
        "tokenizer.kind: must be byte or bpe, not \"wordpiece\"");
  CHECK(TokenizerFromJson({{"kind", "bpe"}}).status().message().find("tokenizer.merges") == 0);
  nlohmann::json forward = {{"kind", "bpe"}, {"merges", {{1, 2}, {258, 3}}}};
  CHECK(TokenizerFromJson(forward).status().message().find("tokenizer.merges[1]") == 0);
}

}  // namespace tokenizer_test
}  // namespace tessera::engine
