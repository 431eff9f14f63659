#include "worker/engine/data/tokenizer.h"

#include <algorithm>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tessera::engine {
namespace {

constexpr uint32_t kByteTokens = 256;
constexpr uint32_t kEos = 256;
constexpr uint32_t kFirstMerged = 257;

enum class CharClass { kSpace, kLetter, kDigit, kSymbol };

CharClass Classify(unsigned char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
    return CharClass::kSpace;
  }
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  return CharClass::kSymbol;
}

class ByteTokenizer final : public Tokenizer {
 public:
  std::string kind() const override { return "byte"; }
  uint32_t vocab_size() const override { return kByteTokens + 1; }
  uint32_t eos_id() const override { return kEos; }
  std::vector<uint32_t> Encode(std::string_view text) const override {
    std::vector<uint32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string Decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    for (uint32_t id : ids) out.push_back(id == kEos ? '\n' : static_cast<char>(id));
    return out;
  }
  nlohmann::json ToJson() const override {
    return {{"kind", "byte"}, {"vocab_size", vocab_size()}, {"eos_id", kEos}};
  }
};

uint64_t PairKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

// Replaces every (a, b) in `ids`, left to right, by `merged`.
void ApplyMerge(std::vector<uint32_t>& ids, uint32_t a, uint32_t b, uint32_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
      ids[out++] = merged;
      ++i;
    } else {
      ids[out++] = ids[i];
    }
  }
  ids.resize(out);
}

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(std::vector<std::pair<uint32_t, uint32_t>> merges)
      : merges_(std::move(merges)) {
    pieces_.resize(kFirstMerged + merges_.size());
    for (uint32_t b = 0; b < kByteTokens; ++b) pieces_[b] = std::string(1, static_cast<char>(b));
    pieces_[kEos] = "\n";
    for (size_t i = 0; i < merges_.size(); ++i) {
      const auto [a, b] = merges_[i];
      const auto id = static_cast<uint32_t>(kFirstMerged + i);
      pieces_[id] = pieces_[a] + pieces_[b];
      rank_[PairKey(a, b)] = id;  // a lower id is an earlier (higher priority) merge
    }
  }
  std::string kind() const override { return "bpe"; }
  uint32_t vocab_size() const override { return static_cast<uint32_t>(pieces_.size()); }
  uint32_t eos_id() const override { return kEos; }

  std::vector<uint32_t> Encode(std::string_view text) const override {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3);
    // Natural text repeats its words: encode each distinct piece once.
    absl::flat_hash_map<std::string_view, std::vector<uint32_t>> cache;
    for (std::string_view piece : PreTokenize(text)) {
      auto [it, inserted] = cache.try_emplace(piece);
      if (inserted) it->second = EncodePiece(piece);
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
    return out;
  }

  std::string Decode(const std::vector<uint32_t>& ids) const override {
    std::string out;
    for (uint32_t id : ids) {
      if (id < pieces_.size()) out += pieces_[id];
    }
    return out;
  }

  nlohmann::json ToJson() const override {
    nlohmann::json merges = nlohmann::json::array();
    for (const auto& [a, b] : merges_) merges.push_back({a, b});
    return {{"kind", "bpe"}, {"vocab_size", vocab_size()}, {"eos_id", kEos}, {"merges", merges}};
  }

 private:
  std::vector<uint32_t> EncodePiece(std::string_view piece) const {
    std::vector<uint32_t> ids(piece.begin(), piece.end());
    for (auto& id : ids) id = static_cast<unsigned char>(id);
    // Apply the earliest-learned merge present, as training did, until none applies.
    while (ids.size() > 1) {
      uint32_t best = UINT32_MAX;
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        auto it = rank_.find(PairKey(ids[i], ids[i + 1]));
        if (it != rank_.end()) best = std::min(best, it->second);
      }
      if (best == UINT32_MAX) break;
      const auto [a, b] = merges_[best - kFirstMerged];
      ApplyMerge(ids, a, b, best);
    }
    return ids;
  }

  std::vector<std::pair<uint32_t, uint32_t>> merges_;
  std::vector<std::string> pieces_;
  absl::flat_hash_map<uint64_t, uint32_t> rank_;
};

// Incremental BPE training over distinct pieces weighted by their counts.
class BpeTrainer {
 public:
  explicit BpeTrainer(const std::vector<std::string>& texts) {
    absl::flat_hash_map<std::string_view, int64_t> counts;
    for (const auto& text : texts) {
      for (std::string_view piece : PreTokenize(text)) ++counts[piece];
    }
    // Sorted, so that training does not depend on hash map order.
    std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [piece, count] : sorted) {
      Word w;
      for (unsigned char c : piece) w.ids.push_back(c);
      w.count = count;
      words_.push_back(std::move(w));
    }
    for (size_t i = 0; i < words_.size(); ++i) AddPairs(i, +1);
  }

  std::vector<std::pair<uint32_t, uint32_t>> Train(uint32_t merges_wanted) {
    std::vector<std::pair<uint32_t, uint32_t>> merges;
    while (merges.size() < merges_wanted && !heap_.empty()) {
      const auto [count, inverted] = heap_.top();
      heap_.pop();
      const uint64_t key = Inverted(inverted);
      auto it = pair_counts_.find(key);
      if (it == pair_counts_.end() || it->second != count) continue;  // stale entry
      if (count < 2) break;
      const uint32_t a = static_cast<uint32_t>(key >> 32), b = static_cast<uint32_t>(key);
      const auto merged = static_cast<uint32_t>(kFirstMerged + merges.size());
      merges.emplace_back(a, b);
      const auto holders = where_[key];  // copy: merging edits the index
      for (size_t w : holders) {
        AddPairs(w, -1);
        ApplyMerge(words_[w].ids, a, b, merged);
        AddPairs(w, +1);
      }
    }
    return merges;
  }

 private:
  struct Word {
    std::vector<uint32_t> ids;
    int64_t count = 0;
  };
  // Ties break towards the smaller pair: the heap orders by (count, ~key).
  static uint64_t Inverted(uint64_t key) { return ~key; }

  // Adds (+1) or removes (-1) the pairs of word `w` from the counts and the pair index; the
  // heap gets the new count of every pair that is still there (older entries go stale).
  void AddPairs(size_t w, int sign) {
    const auto& ids = words_[w].ids;
    absl::flat_hash_set<uint64_t> touched;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const uint64_t key = PairKey(ids[i], ids[i + 1]);
      touched.insert(key);
      pair_counts_[key] += sign * words_[w].count;
    }
    for (uint64_t key : touched) {
      auto it = pair_counts_.find(key);
      if (it->second == 0) {
        pair_counts_.erase(it);
        where_.erase(key);
        continue;
      }
      if (sign > 0) {
        where_[key].insert(w);
      } else {
        where_[key].erase(w);
      }
      heap_.push({it->second, Inverted(key)});
    }
  }

  std::vector<Word> words_;
  absl::flat_hash_map<uint64_t, int64_t> pair_counts_;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<size_t>> where_;
  std::priority_queue<std::pair<int64_t, uint64_t>> heap_;
};

}  // namespace

std::vector<std::string_view> PreTokenize(std::string_view text) {
  auto cls = [&](size_t i) { return Classify(static_cast<unsigned char>(text[i])); };
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    CharClass c = cls(i);
    if (c == CharClass::kSpace) {
      size_t run_end = i;
      while (run_end < text.size() && cls(run_end) == CharClass::kSpace) ++run_end;
      // A space right before a word joins it ("␣word"), as GPT-2's pre-tokenizer does.
      size_t alone_end = run_end;
      if (run_end < text.size() && text[run_end - 1] == ' ') --alone_end;
      if (alone_end > i) {
        pieces.push_back(text.substr(i, alone_end - i));
        i = alone_end;
        continue;
      }
      ++i;  // the joining space
      c = cls(i);
    }
    while (i < text.size() && cls(i) == c) ++i;
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

std::unique_ptr<Tokenizer> MakeByteTokenizer() { return std::make_unique<ByteTokenizer>(); }

absl::StatusOr<std::unique_ptr<Tokenizer>> TrainBpeTokenizer(const std::vector<std::string>& texts,
                                                             uint32_t vocab_size) {
  if (vocab_size < kFirstMerged + 1 || vocab_size > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size: must be between ", kFirstMerged + 1,
                                                   " and 65536, not ", vocab_size));
  }
  BpeTrainer trainer(texts);
  return std::make_unique<BpeTokenizer>(trainer.Train(vocab_size - kFirstMerged));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("kind") || !json["kind"].is_string()) {
    return absl::InvalidArgumentError("tokenizer.kind: required (byte or bpe)");
  }
  const std::string kind = json["kind"];
  if (kind == "byte") return MakeByteTokenizer();
  if (kind != "bpe") {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.kind: must be byte or bpe, not \"", kind, "\""));
  }
  if (!json.contains("merges") || !json["merges"].is_array()) {
    return absl::InvalidArgumentError("tokenizer.merges: required for a bpe tokenizer");
  }
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  const auto& list = json["merges"];
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& m = list[i];
    const uint32_t next = static_cast<uint32_t>(kFirstMerged + i);
    auto valid_id = [&](const nlohmann::json& id) {
      return id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < next &&
             id.get<int64_t>() != kEos;
    };
    if (!m.is_array() || m.size() != 2 || !valid_id(m[0]) || !valid_id(m[1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer.merges[", i, "]: must be two earlier token ids other than ", kEos));
    }
    merges.emplace_back(m[0].get<uint32_t>(), m[1].get<uint32_t>());
  }
  return std::make_unique<BpeTokenizer>(std::move(merges));
}

}  // namespace tessera::engine
