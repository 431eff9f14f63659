#include "worker/image/registry_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "base/file_util.h"

namespace tessera::worker::image {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxErrorBody = 16 << 10;
constexpr size_t kMaxManifest = 4 << 20;
constexpr size_t kMaxToken = 64 << 10;
constexpr const char* kManifestTypes =
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

void GlobalInit() {
  // Once per process, whichever thread comes first (a function's static is initialised once).
  static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)initialized;
}

std::string BasicAuthorization(const RegistryCredentials& creds) {
  return "Basic " + absl::Base64Escape(absl::StrCat(creds.username, ":", creds.password));
}

// curl_easy_escape without a handle (libcurl 7.82 and later).
std::string UrlEscape(const std::string& s) {
  char* e = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
  std::string out = e != nullptr ? e : "";
  curl_free(e);
  return out;
}

// The registry's own words from an error body ({"errors": [{"code", "message"}]}), else its
// first line.
std::string RegistryWords(const std::string& body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("errors") && doc["errors"].is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : doc["errors"]) {
      if (!e.is_object()) continue;
      const std::string code = e.value("code", "");
      const std::string message = e.value("message", "");
      parts.push_back(code.empty() ? message : absl::StrCat(code, ": ", message));
    }
    if (!parts.empty()) return absl::StrJoin(parts, "; ");
  }
  std::string line = body.substr(0, body.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return absl::CHexEscape(absl::StripAsciiWhitespace(line));
}

absl::Status HttpStatusError(long code, const std::string& url, const std::string& body) {
  const std::string what =
      absl::StrCat("HTTP ", code, " from ", url, body.empty() ? "" : ": ", RegistryWords(body));
  if (code == 404) return absl::NotFoundError(what);
  if (code == 401 || code == 403) return absl::PermissionDeniedError(what);
  if (code == 408 || code == 429 || code >= 500) return absl::UnavailableError(what);
  return absl::UnknownError(what);
}

// Shares connections, TLS sessions and DNS answers between the client's transfers (parallel
// layer downloads), so that a registry is connected to once, not once per blob.
class Share {
 public:
  Share() : handle_(curl_share_init()) {
    curl_share_setopt(handle_, CURLSHOPT_LOCKFUNC, &Share::Lock);
    curl_share_setopt(handle_, CURLSHOPT_UNLOCKFUNC, &Share::Unlock);
    curl_share_setopt(handle_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(handle_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(handle_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(handle_, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
  }
  ~Share() { curl_share_cleanup(handle_); }
  CURLSH* handle() const { return handle_; }

 private:
  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Share*>(self)->locks_[data].Lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<Share*>(self)->locks_[data].Unlock();
  }
  CURLSH* handle_;
  absl::Mutex locks_[CURL_LOCK_DATA_LAST];
};

}  // namespace

struct RegistryClient::Response {
  long code = 0;
  std::map<std::string, std::string> headers;  // of the last response, names lower case
  std::string error_body;                      // a non-2xx response's body (capped)
};

namespace {

struct Transfer {
  CURL* curl = nullptr;
  const ByteSink* sink = nullptr;
  absl::Status sink_status;
  std::map<std::string, std::string>* headers = nullptr;
  std::string* error_body = nullptr;
  const std::vector<const std::atomic<bool>*>* stop_flags = nullptr;

  long Code() const {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* self) {
    auto* t = static_cast<Transfer*>(self);
    absl::string_view line(data, size * count);
    if (absl::StartsWith(line, "HTTP/")) t->headers->clear();  // a new response (a redirect)
    const size_t colon = line.find(':');
    if (colon != absl::string_view::npos) {
      (*t->headers)[absl::AsciiStrToLower(line.substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
    return size * count;
  }

  static size_t OnData(char* data, size_t size, size_t count, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t n = size * count;
    const long code = t->Code();
    if (code < 200 || code >= 300) {
      const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, t->error_body->size());
      t->error_body->append(data, std::min(room, n));
      return n;
    }
    t->sink_status = (*t->sink)(data, n);
    return t->sink_status.ok() ? n : 0;  // 0: curl stops with CURLE_WRITE_ERROR
  }

  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto* t = static_cast<Transfer*>(self);
    for (const std::atomic<bool>* flag : *t->stop_flags) {
      if (flag->load()) return 1;
    }
    return 0;
  }
};

Share& SharedHandles() {
  static Share* share = new Share();  // never destroyed: transfers may outlive static teardown
  return *share;
}

}  // namespace

RegistryClient::RegistryClient(ImageReference ref, RegistryClientOptions options,
                               absl::Time deadline)
    : ref_(std::move(ref)), options_(std::move(options)), deadline_(deadline) {
  GlobalInit();
  {
    absl::MutexLock lock(&mu_);
    base_url_ = options_.base_url;
  }
  if (options_.insecure) return;  // no certificate is checked
  // The system's CAs plus the registry's own (certs.d/HOST:PORT/*.crt), as one bundle: libcurl
  // takes one. An unreadable system bundle leaves only the registry's own.
  ca_bundle_ = ReadWholeFile(kSystemCaBundle).value_or("");
  std::error_code ec;
  const fs::path own = fs::path(options_.certs_dir) / ref_.registry;
  if (!options_.certs_dir.empty() && fs::is_directory(own, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(own, ec)) {
      if (entry.path().extension() == ".crt") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) ca_bundle_ += "\n" + ReadWholeFile(f.string()).value_or("");
  }
}

RegistryClient::~RegistryClient() = default;

absl::Status RegistryClient::PerformOnce(const std::string& url, const std::string& accept,
                                         const std::string& authorization, const ByteSink& sink,
                                         Response* response) {
  const absl::Duration left = TimeLeft();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("no time left to GET ", url));
  }
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  Transfer t;
  t.curl = curl;
  t.sink = &sink;
  t.headers = &response->headers;
  t.error_body = &response->error_body;
  t.stop_flags = &options_.stop_flags;
  response->headers.clear();
  response->error_body.clear();

  curl_slist* headers = nullptr;
  if (!accept.empty()) headers = curl_slist_append(headers, ("Accept: " + accept).c_str());
  // libcurl sends a custom Authorization header only to the host and port first asked, never
  // to the host a redirect leads to (a blob store's signed URL).
  if (!authorization.empty()) {
    headers = curl_slist_append(headers, ("Authorization: " + authorization).c_str());
  }
  curl_blob ca{ca_bundle_.data(), ca_bundle_.size(), CURL_BLOB_NOCOPY};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_SHARE, SharedHandles().handle());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "tessera-worker");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // A registry checked by TLS is not redirected to plain HTTP (a blob store's URL over http
  // would show a private image to the network).
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, options_.insecure ? "http,https" : "https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(left)));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(absl::ToInt64Milliseconds(left), 30'000)));
  // Stalled: under 1 byte/s for stall_timeout.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(
      curl, CURLOPT_LOW_SPEED_TIME,
      static_cast<long>(std::max<int64_t>(1, absl::ToInt64Seconds(options_.stall_timeout))));
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L << 10);
  if (options_.insecure) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (!ca_bundle_.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);

  const CURLcode rc = curl_easy_perform(curl);
  response->code = t.Code();
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);

  if (rc == CURLE_OK) return absl::OkStatus();
  const std::string why =
      absl::StrCat("GET ", url, ": ", error[0] != '\0' ? error : curl_easy_strerror(rc));
  switch (rc) {
    case CURLE_WRITE_ERROR:
      return t.sink_status.ok() ? absl::InternalError(why) : t.sink_status;
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::PermissionDeniedError(
          absl::StrCat(why, " (a registry checked by TLS was redirected to a URL without TLS)"));
    case CURLE_ABORTED_BY_CALLBACK:
      return absl::CancelledError(absl::StrCat(why, ": stopped"));
    case CURLE_OPERATION_TIMEDOUT:
      return TimeLeft() <= absl::ZeroDuration() ? absl::DeadlineExceededError(why)
                                                : absl::UnavailableError(why + " (stalled)");
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_TOO_MANY_REDIRECTS:
      return absl::UnavailableError(why);
    default:
      return absl::UnknownError(why);
  }
}

void RegistryClient::ResolveBaseUrl() {
  {
    absl::MutexLock lock(&mu_);
    if (!base_url_.empty()) return;
  }
  // docker.io's API lives on registry-1.docker.io.
  const std::string host = ref_.registry == "docker.io" ? "registry-1.docker.io" : ref_.registry;
  std::string base = "https://" + host;
  if (options_.insecure) {
    // As skopeo with --tls-verify=false: TLS when the registry speaks it, else plain HTTP.
    Response response;
    const ByteSink discard = [](const char*, size_t) { return absl::OkStatus(); };
    absl::Status st = PerformOnce(base + "/v2/", "", "", discard, &response);
    if (!st.ok() && response.code == 0 && st.code() == absl::StatusCode::kUnavailable) {
      base = "http://" + host;
    }
  }
  absl::MutexLock lock(&mu_);
  base_url_ = base;
}

absl::Status RegistryClient::Authenticate(const std::string& challenge_header) {
  auto challenge = ParseAuthChallenge(challenge_header);
  if (!challenge.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the registry asks for authentication in a form not understood: ",
                     challenge.status().message()));
  }
  const RegistryCredentials& creds = options_.credentials;
  if (challenge->scheme == "basic") {
    if (creds.empty()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the registry ", ref_.registry,
          " requires a user name and password, and the run has no docker-registry secret for it"));
    }
    absl::MutexLock lock(&mu_);
    authorization_ = BasicAuthorization(creds);
    return absl::OkStatus();
  }
  if (challenge->scheme != "bearer") {
    return absl::PermissionDeniedError(absl::StrCat(
        "the registry asks for authentication by \"", absl::CHexEscape(challenge->scheme),
        "\", which is not supported (only Bearer and Basic are)"));
  }
  const std::string realm = challenge->params["realm"];
  if (!absl::StartsWith(realm, "https://") && !absl::StartsWith(realm, "http://")) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the registry's token service is not an http(s) URL: \"", absl::CHexEscape(realm), "\""));
  }
  if (!options_.insecure && !creds.empty() && !absl::StartsWith(realm, "https://")) {
    return absl::PermissionDeniedError(
        absl::StrCat("the registry's token service ", realm,
                     " is plain HTTP: the credentials are not sent there (list the registry with "
                     "--insecure-registry if that is intended)"));
  }
  // The token service: GET realm?service=...&scope=repository:NAME:pull, with the credentials
  // when there are any (anonymous pulls of public images get a token too).
  std::string scope = challenge->params["scope"];
  if (scope.empty()) scope = absl::StrCat("repository:", ref_.repository, ":pull");
  std::string url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
  if (!challenge->params["service"].empty()) {
    absl::StrAppend(&url, "service=", UrlEscape(challenge->params["service"]), "&");
  }
  absl::StrAppend(&url, "scope=", UrlEscape(scope));

  std::string body;
  const ByteSink collect = [&](const char* data, size_t size) {
    if (body.size() + size > kMaxToken) {
      return absl::ResourceExhaustedError("the token service's answer is over 64 KiB");
    }
    body.append(data, size);
    return absl::OkStatus();
  };
  Response response;
  absl::Status st = PerformOnce(url, "application/json",
                                creds.empty() ? "" : BasicAuthorization(creds), collect, &response);
  if (!st.ok()) return st;
  if (response.code < 200 || response.code >= 300) {
    absl::Status http = HttpStatusError(response.code, realm, response.error_body);
    return absl::Status(http.code(),
                        absl::StrCat("the registry's token service refused: ", http.message()));
  }
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  std::string token;
  if (doc.is_object()) {
    if (doc.contains("token") && doc["token"].is_string()) token = doc["token"];
    if (token.empty() && doc.contains("access_token") && doc["access_token"].is_string()) {
      token = doc["access_token"];
    }
  }
  if (token.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the registry's token service at ", realm, " answered no token"));
  }
  absl::MutexLock lock(&mu_);
  authorization_ = "Bearer " + token;
  return absl::OkStatus();
}

absl::Status RegistryClient::Get(const std::string& path, const std::string& accept,
                                 const ByteSink& sink, Response* response) {
  ResolveBaseUrl();
  std::string base, authorization;
  {
    absl::MutexLock lock(&mu_);
    base = base_url_;
    authorization = authorization_;
  }
  const std::string url = absl::StrCat(base, "/v2/", ref_.repository, "/", path);
  for (int attempt = 0;; ++attempt) {
    absl::Status st = PerformOnce(url, accept, authorization, sink, response);
    if (!st.ok()) return st;
    if (response->code == 401 && attempt == 0) {
      const auto challenge = response->headers.find("www-authenticate");
      if (challenge == response->headers.end()) break;
      if (absl::Status auth = Authenticate(challenge->second); !auth.ok()) return auth;
      absl::MutexLock lock(&mu_);
      authorization = authorization_;
      continue;
    }
    break;
  }
  if (response->code >= 200 && response->code < 300) return absl::OkStatus();
  return HttpStatusError(response->code, url, response->error_body);
}

absl::StatusOr<Manifest> RegistryClient::GetManifest(const std::string& digest) {
  Manifest manifest;
  const ByteSink collect = [&](const char* data, size_t size) {
    if (manifest.body.size() + size > kMaxManifest) {
      return absl::ResourceExhaustedError(absl::StrCat("the manifest ", digest, " is over 4 MiB"));
    }
    manifest.body.append(data, size);
    return absl::OkStatus();
  };
  Response response;
  if (absl::Status st = Get("manifests/" + digest, kManifestTypes, collect, &response); !st.ok()) {
    return st;
  }
  const std::string got = Sha256Digest(manifest.body);
  if (got != digest) {
    return absl::DataLossError(
        absl::StrCat("the registry sent a manifest whose digest is ", got, ", not ", digest));
  }
  const auto type = response.headers.find("content-type");
  if (type != response.headers.end()) {
    manifest.media_type = type->second.substr(0, type->second.find(';'));
  }
  return manifest;
}

absl::StatusOr<std::string> RegistryClient::GetBlob(const std::string& digest, int64_t max_bytes) {
  std::string body;
  const ByteSink collect = [&](const char* data, size_t size) {
    if (static_cast<int64_t>(body.size() + size) > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the blob ", digest, " is over ", max_bytes, " bytes"));
    }
    body.append(data, size);
    return absl::OkStatus();
  };
  if (absl::Status st = StreamBlob(digest, collect); !st.ok()) return st;
  return body;
}

absl::Status RegistryClient::StreamBlob(const std::string& digest, const ByteSink& sink,
                                        int64_t size_limit) {
  Sha256Stream sha;
  int64_t received = 0;
  const ByteSink checked = [&](const char* data, size_t size) {
    received += static_cast<int64_t>(size);
    if (size_limit >= 0 && received > size_limit) {
      return absl::DataLossError(absl::StrCat("the registry sent more of blob ", digest,
                                              " than the ", size_limit,
                                              " bytes its manifest says"));
    }
    sha.Update(data, size);
    return sink(data, size);
  };
  Response response;
  if (absl::Status st = Get("blobs/" + digest, "", checked, &response); !st.ok()) return st;
  const std::string got = sha.Digest();
  if (got != digest) {
    return absl::DataLossError(
        absl::StrCat("the registry sent a blob whose digest is ", got, ", not ", digest));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
