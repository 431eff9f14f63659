#include "proto/policy/packed_log_lines.h"

#include <queue>
#include <tuple>

namespace tessera {

int64_t LogTimeMicros(const google::protobuf::Timestamp& time) {
  return time.seconds() * 1'000'000 + time.nanos() / 1000;
}

google::protobuf::Timestamp LogTimeFromMicros(int64_t micros) {
  google::protobuf::Timestamp t;
  // Floor division: a time before the epoch has a negative seconds and positive nanos.
  const int64_t seconds = micros >= 0 ? micros / 1'000'000 : (micros - 999'999) / 1'000'000;
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>((micros - seconds * 1'000'000) * 1000));
  return t;
}

void PackLine(const v1::LogLine& line, v1::PackedLogLines& group) {
  AppendChunkLine({.sequence = line.sequence(),
                   .micros = LogTimeMicros(line.time()),
                   .dropped = line.dropped_lines(),
                   .text = line.text()},
                  *group.mutable_lines());
}

absl::Status UnpackLines(const v1::PackedLogLines& group, std::vector<v1::LogLine>& out) {
  v1::LogLine proto;
  CopyStreamFields(group, proto);
  return ForEachPackedLine(group, [&](const ChunkLine& c) {
    v1::LogLine& l = out.emplace_back(proto);
    l.set_sequence(c.sequence);
    *l.mutable_time() = LogTimeFromMicros(c.micros);
    l.set_dropped_lines(c.dropped);
    l.set_text(c.text.data(), c.text.size());
  });
}

absl::StatusOr<std::vector<v1::LogLine>> LinesInDisplayOrder(const v1::LogLines& batch) {
  std::vector<v1::LogLine> out(batch.lines().begin(), batch.lines().end());
  if (batch.packed().empty()) return out;
  std::vector<std::vector<v1::LogLine>> groups(batch.packed_size());
  size_t total = 0;
  for (int i = 0; i < batch.packed_size(); ++i) {
    if (auto st = UnpackLines(batch.packed(i), groups[i]); !st.ok()) return st;
    total += groups[i].size();
  }
  out.reserve(out.size() + total);
  // A k-way merge: each group's next line at the latest time of its group so far.
  struct Head {
    int64_t at;
    int32_t rank;
    int32_t stream;
    size_t group;
    size_t next;
    bool operator>(const Head& o) const {
      return std::tie(at, rank, stream, group) > std::tie(o.at, o.rank, o.stream, o.group);
    }
  };
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  const auto push = [&](size_t g, size_t next, int64_t latest) {
    if (next >= groups[g].size()) return;
    const v1::LogLine& l = groups[g][next];
    heads.push({std::max(latest, LogTimeMicros(l.time())), l.rank(), l.stream(), g, next});
  };
  for (size_t g = 0; g < groups.size(); ++g) push(g, 0, INT64_MIN);
  while (!heads.empty()) {
    const Head h = heads.top();
    heads.pop();
    out.push_back(std::move(groups[h.group][h.next]));
    push(h.group, h.next + 1, h.at);
  }
  return out;
}

}  // namespace tessera
