#include "services/notify/webhook_poster.h"

#include <curl/curl.h>

#include "absl/strings/str_cat.h"

namespace tessera::notify {
namespace {

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

class CurlWebhookPoster final : public WebhookPoster {
 public:
  CurlWebhookPoster() {
    // Once per process, whichever thread comes first (a function's static is initialised once).
    static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
    (void)initialized;
  }

  WebhookResponse Post(const WebhookRequest& request, absl::Duration timeout) override {
    WebhookResponse out;
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      out.error = "cannot start an HTTP client";
      return out;
    }
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : request.headers) {
      headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
    }
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    char error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(timeout)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM, from any thread
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    const CURLcode code = curl_easy_perform(curl);
    if (code == CURLE_OK) {
      long status = 0;
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      out.http_status = static_cast<int>(status);
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      out.error = absl::StrCat("no answer within ", absl::FormatDuration(timeout));
    } else {
      out.error = error[0] != 0 ? std::string(error) : std::string(curl_easy_strerror(code));
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return out;
  }
};

}  // namespace

std::shared_ptr<WebhookPoster> MakeCurlWebhookPoster() {
  return std::make_shared<CurlWebhookPoster>();
}

}  // namespace tessera::notify
