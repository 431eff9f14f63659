#include "services/common/auth/api_keys.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/timestamps.h"
#include "services/common/auth/peer_identity.h"
#include "services/store/traffic_class.h"

namespace tessera::auth {
namespace {

// Every node's key and every person's: a cluster of 10,000 nodes must not thrash it.
constexpr size_t kMaxCacheEntries = 100'000;
// Stale keys re-read in one statement, at most this many.
constexpr size_t kRefreshBatch = 1'000;

std::string RandomHex(int bytes) {
  std::string raw(static_cast<size_t>(bytes), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes) != 1) {
    // Without a working CSPRNG no secret may be made at all.
    spdlog::critical("OpenSSL's RAND_bytes failed: no API key can be made");
    std::abort();
  }
  return absl::BytesToHexString(raw);
}

}  // namespace

std::string HashSecret(const std::string& secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(secret.data(), secret.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string NewSecret() { return "tsk_" + RandomHex(32); }

std::string NewKeyId() { return "key-" + RandomHex(8); }

std::string NewJoinTokenSecret() { return "tjt_" + RandomHex(32); }

std::string NewJoinTokenId() { return "jt-" + RandomHex(8); }

std::string KeyIdForRequest(const std::string& scope, const std::string& request_key) {
  return "key-" + HashSecret(absl::StrCat(scope, "\n", request_key)).substr(0, 16);
}

absl::StatusOr<std::string> BearerToken(const std::string& header_value) {
  if (header_value.empty()) {
    return absl::UnauthenticatedError(
        "missing API key: send the header 'authorization: Bearer KEY' (mcli set api-key KEY)");
  }
  const auto space = header_value.find(' ');
  if (space == std::string::npos ||
      absl::AsciiStrToLower(header_value.substr(0, space)) != "bearer") {
    return absl::UnauthenticatedError("malformed authorization header: expected 'Bearer KEY'");
  }
  std::string token(absl::StripAsciiWhitespace(header_value.substr(space + 1)));
  if (token.empty()) return absl::UnauthenticatedError("empty API key in the authorization header");
  return token;
}

Authenticator::Authenticator(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
                             absl::Duration cache_ttl, std::shared_ptr<AuditLog> audit)
    : keys_(std::move(keys)),
      clock_(std::move(clock)),
      cache_ttl_(cache_ttl),
      audit_(std::move(audit)),
      unknown_keys_(clock_, kDefaultUnknownKeysPerSecond),
      calls_(clock_, 0, 0) {}

Authenticator::~Authenticator() {
  {
    absl::MutexLock lock(&refresh_mu_);
    stopping_ = true;
  }
  refresh_cv_.SignalAll();
  if (refresher_.joinable()) refresher_.join();
}

namespace {
std::string HeaderOf(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::string value;
  if (it != metadata.end()) value.assign(it->second.data(), it->second.size());
  return value;
}
}  // namespace

absl::StatusOr<Principal> Authenticator::Authenticate(const grpc::ServerContextBase& context) {
  auto who = Authenticate(HeaderOf(context), OriginOf(context));
  if (!who.ok()) return who;
  if (auto st = CheckPeerIdentity(PeerOf(context), *who); !st.ok()) return st;
  return who;
}

absl::StatusOr<std::string> Authenticator::KeyHash(const grpc::ServerContextBase& context) {
  auto token = BearerToken(HeaderOf(context));
  if (!token.ok()) return token.status();
  return HashSecret(*token);
}

absl::StatusOr<Principal> Authenticator::Answer(const CacheEntry& entry, absl::Time now) {
  if (entry.principal.ok() && now >= entry.key_expires) {
    return absl::UnauthenticatedError(absl::StrCat("the API key of ", entry.principal->user,
                                                   " expired at ",
                                                   absl::FormatTime(entry.key_expires)));
  }
  return entry.principal;
}

Authenticator::CacheEntry Authenticator::EntryFor(const store::ApiKeyRecord* record,
                                                  absl::Time now) const {
  CacheEntry entry{absl::UnauthenticatedError("invalid API key"), now + cache_ttl_};
  if (record == nullptr) {
    // invalid, as set
  } else if (record->key.revoked()) {
    entry.principal =
        absl::UnauthenticatedError(absl::StrCat("API key ", record->key.id(), " was revoked"));
  } else {
    entry.principal = Principal{record->key.user(), record->key.role(), record->key.node()};
    entry.principal->key_id = record->key.id();
    entry.principal->node_terms = record->key.node_terms();
    if (record->key.has_expires_at()) entry.key_expires = FromProtoTime(record->key.expires_at());
  }
  return entry;
}

absl::Status Authenticator::ChargeCall(const Principal& who) {
  if (!who.is_person() || who.may_operate_nodes()) return absl::OkStatus();
  const absl::Duration wait = calls_.TrySpend(who.user);
  if (wait == absl::ZeroDuration()) return absl::OkStatus();
  const double rate = calls_.per_second();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "user %s called faster than this service allows one user (%g calls a second, %g at once: "
      "tessera-server --max-calls-per-user-per-second %g); call again in %.1f s",
      who.user, rate, rate * 10, rate, std::max(absl::ToDoubleSeconds(wait), 0.1)));
}

absl::Status Authenticator::AcquireStream(const std::string& user) {
  const int limit = max_streams_per_user_;
  absl::MutexLock lock(&streams_mu_);
  int& open = open_streams_[user];
  if (limit > 0 && open >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat(user, " has ", open,
                     " streams open (log follows, watches, shells), the most one user may "
                     "(tessera-server --max-streams-per-user ",
                     limit, "); close some"));
  }
  ++open;
  return absl::OkStatus();
}

void Authenticator::ReleaseStream(const std::string& user) {
  absl::MutexLock lock(&streams_mu_);
  auto it = open_streams_.find(user);
  if (it == open_streams_.end()) return;
  if (--it->second <= 0) open_streams_.erase(it);
}

void Authenticator::EvictLocked(absl::Time now) {
  // Stale answers go first, then refusals (a flood of made-up keys), and only then good ones:
  // the keys people use stay cached whatever is thrown at the service. A tenth at least goes
  // each time, so that a full cache costs one pass over it per 10,000 inserts, not per insert.
  const size_t target = kMaxCacheEntries - kMaxCacheEntries / 10;
  absl::erase_if(cache_, [&](const auto& kv) { return kv.second.expires <= now; });
  if (cache_.size() > target) {
    absl::erase_if(cache_, [&](const auto& kv) {
      return cache_.size() > target && !kv.second.principal.ok();
    });
  }
  for (auto it = cache_.begin(); cache_.size() > target && it != cache_.end();) {
    cache_.erase(it++);
  }
}

void Authenticator::Cache(const std::string& hash, const CacheEntry& entry) {
  absl::MutexLock lock(&mu_);
  if (cache_.size() >= kMaxCacheEntries && !cache_.contains(hash)) EvictLocked(clock_->Now());
  cache_[hash] = entry;
}

absl::StatusOr<Authenticator::CacheEntry> Authenticator::Lookup(const std::string& hash) {
  const absl::Time now = clock_->Now();
  auto record = keys_->FindByHash(hash);
  if (!record.ok() && !absl::IsNotFound(record.status())) {
    return record.status();  // not cached: the store may come back
  }
  const CacheEntry entry = EntryFor(record.ok() ? &*record : nullptr, now);
  Cache(hash, entry);
  return entry;
}

absl::StatusOr<Principal> Authenticator::Authenticate(const std::string& authorization_header) {
  return Authenticate(authorization_header, CallOrigin{.control_plane = true, .address = ""});
}

absl::StatusOr<Principal> Authenticator::Authenticate(const std::string& authorization_header,
                                                      const CallOrigin& origin) {
  auto token = BearerToken(authorization_header);
  if (!token.ok()) return token.status();
  const std::string hash = HashSecret(*token);
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    auto hit = cache_.find(hash);
    if (hit != cache_.end() && hit->second.expires > now) return Answer(hit->second, now);
  }
  if (!origin.control_plane) {
    if (absl::Status admitted = unknown_keys_.Admit(origin.address); !admitted.ok()) {
      return admitted;
    }
  }
  // Decided by who asked, before the lookup: a person's made-up keys never hold the database
  // connections kept for the control plane.
  store::TrafficScope traffic(origin.control_plane ? store::TrafficClass::kControl
                                                   : store::TrafficClass::kUser);
  auto entry = Lookup(hash);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<Principal> answer = Answer(*entry, now);
  if (!answer.ok() && !origin.control_plane) unknown_keys_.Failed(origin.address);
  return answer;
}

absl::StatusOr<absl::Time> Authenticator::Revalidate(const std::string& key_hash) {
  const absl::Time now = clock_->Now();
  bool stale = true;
  absl::Time holds_until = now;
  {
    absl::MutexLock lock(&mu_);
    auto hit = cache_.find(key_hash);
    if (hit != cache_.end()) {
      if (auto answer = Answer(hit->second, now); !answer.ok()) return answer.status();
      stale = hit->second.expires <= now;
      if (!stale) holds_until = std::min(hit->second.expires, hit->second.key_expires);
    }
  }
  if (stale) {
    absl::MutexLock lock(&refresh_mu_);
    if (!refresher_.joinable()) refresher_ = std::thread([this] { RefreshLoop(); });
    const bool was_empty = refresh_queue_.empty();
    if (refresh_queue_.size() < kMaxCacheEntries) refresh_queue_.push_back(key_hash);
    // The refresher waits for a first key, then gathers more until a batch is full or a few
    // milliseconds pass: only those two wake it. Woken by every key (10,000 streams revalidate
    // 2,000 keys a second), it cost context switches on the streams' threads and its own.
    if (was_empty || refresh_queue_.size() == kRefreshBatch) refresh_cv_.Signal();
  }
  return holds_until;
}

void Authenticator::RefreshLoop() {
  // Held but while the store is read (below); the CondVar's waits release it meanwhile.
  absl::MutexLock lock(&refresh_mu_);
  while (true) {
    while (!stopping_ && refresh_queue_.empty()) refresh_cv_.Wait(&refresh_mu_);
    // Streams whose keys went stale together (they were checked together) queue theirs within
    // moments of each other: gather them for a few milliseconds so that one statement reads
    // them all, however the threads happen to be scheduled. A background wait on real time: no
    // answer waits for it.
    const absl::Time gathered = absl::Now() + absl::Milliseconds(5);
    while (!stopping_ && refresh_queue_.size() < kRefreshBatch &&
           !refresh_cv_.WaitWithDeadline(&refresh_mu_, gathered)) {
    }
    if (stopping_) return;
    // Every stale key queued so far, read in one statement.
    std::vector<std::string> hashes;
    absl::flat_hash_set<std::string> queued;
    {
      absl::MutexLock cache_lock(&mu_);
      const absl::Time now = clock_->Now();
      while (!refresh_queue_.empty() && hashes.size() < kRefreshBatch) {
        std::string hash = std::move(refresh_queue_.front());
        refresh_queue_.pop_front();
        auto hit = cache_.find(hash);
        if (hit != cache_.end() && hit->second.expires > now) continue;  // refreshed
        if (queued.insert(hash).second) hashes.push_back(std::move(hash));
      }
    }
    if (hashes.empty()) continue;
    refresh_mu_.Unlock();
    const absl::Time now = clock_->Now();
    auto records = keys_->FindByHashes(hashes);
    if (records.ok()) {  // a store that cannot be reached keeps the stale answers
      absl::flat_hash_map<std::string, const store::ApiKeyRecord*> found;
      for (const auto& r : *records) found[r.secret_hash] = &r;
      for (const auto& hash : hashes) {
        auto it = found.find(hash);
        Cache(hash, EntryFor(it == found.end() ? nullptr : it->second, now));
      }
    }
    refresh_mu_.Lock();
  }
}

}  // namespace tessera::auth
