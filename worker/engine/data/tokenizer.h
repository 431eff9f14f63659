#pragma once
// Tokenizers for tessera-data and the engine: byte-level (every byte is a token) and a byte-level
// BPE trained by tessera-data on the corpus itself. Both reserve one end-of-document token, put
// between documents. Saved as JSON next to the dataset's shards.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::engine {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;
  virtual uint32_t vocab_size() const = 0;
  // The end-of-document token.
  virtual uint32_t eos_id() const = 0;
  virtual std::vector<uint32_t> Encode(std::string_view text) const = 0;
  // Bytes of the tokens (the end-of-document token decodes to "\n").
  virtual std::string Decode(const std::vector<uint32_t>& ids) const = 0;
  virtual nlohmann::json ToJson() const = 0;
};

// 256 byte tokens and the end-of-document token (256).
std::unique_ptr<Tokenizer> MakeByteTokenizer();

// Learns BPE merges over `texts` until the vocabulary has `vocab_size` tokens (or no pair occurs
// twice). `vocab_size` must be at least 258 (the bytes, end-of-document and one merge).
absl::StatusOr<std::unique_ptr<Tokenizer>> TrainBpeTokenizer(const std::vector<std::string>& texts,
                                                             uint32_t vocab_size);

// Rebuilds a tokenizer from its ToJson(); errors name the field.
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(const nlohmann::json& json);

// Splits text into the pieces BPE merges never cross: an optional leading space followed by a
// run of letters (any byte >= 0x80 counts as a letter), of digits, or of other symbols; other
// whitespace runs stand alone. Concatenating the pieces gives the text back.
std::vector<std::string_view> PreTokenize(std::string_view text);

}  // namespace tessera::engine
