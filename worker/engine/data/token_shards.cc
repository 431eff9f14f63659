#include "worker/engine/data/token_shards.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "worker/engine/common/content_hash.h"

namespace tessera::engine {
namespace fs = std::filesystem;

namespace {

absl::Status FieldError(const std::string& source, const std::string& field,
                        const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, ": ", what));
}

absl::StatusOr<int64_t> PositiveInt(const nlohmann::json& obj, const std::string& key,
                                    const std::string& source, const std::string& path) {
  if (!obj.contains(key)) return FieldError(source, path + key, "required");
  const auto& v = obj[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return FieldError(source, path + key, "must be a positive integer, not " + v.dump());
  }
  return v.get<int64_t>();
}

}  // namespace

nlohmann::json DatasetIndex::ToJson() const {
  nlohmann::json shards_json = nlohmann::json::array();
  for (const auto& s : shards) {
    shards_json.push_back(
        {{"file", s.file}, {"samples", s.samples}, {"bytes", s.bytes}, {"xxh3_128", s.hash}});
  }
  return {{"format", "tessera-tokens"},     {"version", 1},
          {"sample_tokens", sample_tokens}, {"token_bytes", token_bytes},
          {"total_samples", total_samples}, {"total_tokens", total_tokens},
          {"tokenizer", tokenizer},         {"shards", shards_json}};
}

absl::StatusOr<DatasetIndex> DatasetIndex::FromJson(const nlohmann::json& json,
                                                    const std::string& source) {
  if (!json.is_object()) return FieldError(source, "(top level)", "must be an object");
  if (json.value("format", "") != "tessera-tokens") {
    return FieldError(source, "format",
                      "must be \"tessera-tokens\" (a folder written by tessera-data convert)");
  }
  if (json.value("version", 0) != 1)
    return FieldError(source, "version", "only version 1 is known");
  DatasetIndex index;
  TESSERA_ASSIGN_OR_RETURN(index.sample_tokens, PositiveInt(json, "sample_tokens", source, ""));
  if (index.sample_tokens < 2) return FieldError(source, "sample_tokens", "must be at least 2");
  TESSERA_ASSIGN_OR_RETURN(const int64_t token_bytes, PositiveInt(json, "token_bytes", source, ""));
  if (token_bytes != 2 && token_bytes != 4)
    return FieldError(source, "token_bytes", "must be 2 or 4");
  index.token_bytes = static_cast<int>(token_bytes);
  TESSERA_ASSIGN_OR_RETURN(index.total_samples, PositiveInt(json, "total_samples", source, ""));
  index.total_tokens = json.value("total_tokens", int64_t{0});
  if (!json.contains("tokenizer") || !json["tokenizer"].is_object()) {
    return FieldError(source, "tokenizer", "required");
  }
  index.tokenizer = json["tokenizer"];
  if (!json.contains("shards") || !json["shards"].is_array() || json["shards"].empty()) {
    return FieldError(source, "shards", "must be a non-empty list");
  }
  int64_t sum = 0;
  for (size_t i = 0; i < json["shards"].size(); ++i) {
    const auto& s = json["shards"][i];
    const std::string path = absl::StrCat("shards[", i, "].");
    if (!s.is_object())
      return FieldError(source, absl::StrCat("shards[", i, "]"), "must be an object");
    ShardInfo info;
    if (!s.contains("file") || !s["file"].is_string() ||
        s["file"].get<std::string>().find('/') != std::string::npos) {
      return FieldError(source, path + "file", "must be a file name in the dataset folder");
    }
    info.file = s["file"];
    TESSERA_ASSIGN_OR_RETURN(info.samples, PositiveInt(s, "samples", source, path));
    TESSERA_ASSIGN_OR_RETURN(info.bytes, PositiveInt(s, "bytes", source, path));
    if (info.bytes != info.samples * index.sample_tokens * index.token_bytes) {
      return FieldError(
          source, path + "bytes",
          absl::StrCat(info.bytes, " does not match ", info.samples, " samples of ",
                       index.sample_tokens, " tokens of ", index.token_bytes, " bytes"));
    }
    if (!s.contains("xxh3_128") || !s["xxh3_128"].is_string() ||
        s["xxh3_128"].get<std::string>().size() != 32) {
      return FieldError(source, path + "xxh3_128", "must be 32 hex digits");
    }
    info.hash = s["xxh3_128"];
    sum += info.samples;
    index.shards.push_back(std::move(info));
  }
  if (sum != index.total_samples) {
    return FieldError(
        source, "total_samples",
        absl::StrCat(index.total_samples, " is not the sum of the shards' samples (", sum, ")"));
  }
  return index;
}

ShardWriter::ShardWriter(std::string folder, int64_t sample_tokens, int token_bytes,
                         int64_t samples_per_shard)
    : folder_(std::move(folder)), samples_per_shard_(std::max<int64_t>(1, samples_per_shard)) {
  index_.sample_tokens = sample_tokens;
  index_.token_bytes = token_bytes;
}

absl::Status ShardWriter::Add(const std::vector<uint32_t>& sample) {
  if (static_cast<int64_t>(sample.size()) != index_.sample_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sample has ", sample.size(), " tokens, not ", index_.sample_tokens));
  }
  for (uint32_t t : sample) {
    // Little-endian, whatever the host.
    for (int b = 0; b < index_.token_bytes; ++b)
      pending_.push_back(static_cast<char>(t >> (8 * b)));
  }
  if (++pending_samples_ == samples_per_shard_) return FlushShard();
  return absl::OkStatus();
}

absl::Status ShardWriter::FlushShard() {
  if (pending_samples_ == 0) return absl::OkStatus();
  ShardInfo info;
  info.file = absl::StrFormat("shard.%05d.bin", index_.shards.size());
  info.samples = pending_samples_;
  info.bytes = static_cast<int64_t>(pending_.size());
  info.hash = HashBytes(pending_);
  TESSERA_RETURN_IF_ERROR(WriteFileDurably(folder_ + "/" + info.file, pending_));
  index_.total_samples += pending_samples_;
  index_.shards.push_back(std::move(info));
  pending_.clear();
  pending_samples_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<DatasetIndex> ShardWriter::Finish(const nlohmann::json& tokenizer,
                                                 int64_t total_tokens) {
  TESSERA_RETURN_IF_ERROR(FlushShard());
  if (index_.shards.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input is too short for one sample of ", index_.sample_tokens, " tokens"));
  }
  index_.tokenizer = tokenizer;
  index_.total_tokens = total_tokens;
  TESSERA_RETURN_IF_ERROR(
      WriteFileDurably(folder_ + "/" + kDatasetIndexFile, index_.ToJson().dump(2) + "\n"));
  return index_;
}

TokenShardReader::TokenShardReader(std::string folder, DatasetIndex index, size_t cached_shards)
    : folder_(std::move(folder)),
      index_(std::move(index)),
      cached_shards_(std::max<size_t>(1, cached_shards)) {
  int64_t first = 0;
  for (const auto& s : index_.shards) {
    first_sample_.push_back(first);
    first += s.samples;
  }
}

absl::StatusOr<std::unique_ptr<TokenShardReader>> TokenShardReader::Open(const std::string& folder,
                                                                         size_t cached_shards) {
  const std::string index_path = folder + "/" + kDatasetIndexFile;
  TESSERA_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(index_path));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not valid JSON"));
  }
  TESSERA_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::FromJson(json, index_path));
  for (const auto& s : index.shards) {
    const std::string path = folder + "/" + s.file;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
    if (static_cast<int64_t>(size) != s.bytes) {
      return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, but index.json says ",
                                              s.bytes, " (truncated or replaced)"));
    }
  }
  return std::unique_ptr<TokenShardReader>(
      new TokenShardReader(folder, std::move(index), cached_shards));
}

std::vector<int64_t> TokenShardReader::ShardSampleCounts() const {
  std::vector<int64_t> counts;
  for (const auto& s : index_.shards) counts.push_back(s.samples);
  return counts;
}

absl::StatusOr<const TokenShardReader::LoadedShard*> TokenShardReader::Load(size_t shard) {
  for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
    if (it->shard == shard) {
      loaded_.splice(loaded_.begin(), loaded_, it);
      return &loaded_.front();
    }
  }
  const ShardInfo& info = index_.shards[shard];
  const std::string path = folder_ + "/" + info.file;
  TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (static_cast<int64_t>(bytes.size()) != info.bytes) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes.size(),
                                            " bytes, but index.json says ", info.bytes,
                                            " (truncated or replaced)"));
  }
  const std::string hash = HashBytes(bytes);
  if (hash != info.hash) {
    return absl::DataLossError(absl::StrCat(path, ": content hash ", hash,
                                            " does not match index.json's ", info.hash,
                                            " (the shard is corrupt)"));
  }
  loaded_.push_front(LoadedShard{shard, std::move(bytes)});
  while (loaded_.size() > cached_shards_) loaded_.pop_back();
  return &loaded_.front();
}

absl::Status TokenShardReader::ReadSample(int64_t id, int64_t* out) {
  if (id < 0 || id >= index_.total_samples) {
    return absl::OutOfRangeError(
        absl::StrCat("sample ", id, " is outside the dataset's ", index_.total_samples));
  }
  const auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), id);
  const size_t shard = static_cast<size_t>(it - first_sample_.begin()) - 1;
  TESSERA_ASSIGN_OR_RETURN(const LoadedShard* loaded, Load(shard));
  const int64_t sample_bytes = index_.sample_tokens * index_.token_bytes;
  const auto* p = reinterpret_cast<const unsigned char*>(loaded->bytes.data()) +
                  (id - first_sample_[shard]) * sample_bytes;
  for (int64_t t = 0; t < index_.sample_tokens; ++t) {
    uint32_t v = 0;
    for (int b = 0; b < index_.token_bytes; ++b) v |= static_cast<uint32_t>(p[b]) << (8 * b);
    out[t] = v;
    p += index_.token_bytes;
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine
