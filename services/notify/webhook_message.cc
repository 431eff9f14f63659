#include "services/notify/webhook_message.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"

namespace tessera::notify {
namespace {

constexpr size_t kMaxUrlBytes = 2048;

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace

absl::Status CheckWebhookUrl(const std::string& url) {
  if (url.empty()) return absl::InvalidArgumentError("url: required");
  if (url.size() > kMaxUrlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("url: ", url.size(), " bytes, over the limit of ", kMaxUrlBytes));
  }
  for (const char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("url: must not contain spaces or control characters");
    }
  }
  const bool https = url.rfind("https://", 0) == 0;
  const bool http = !https && url.rfind("http://", 0) == 0;
  if (!https && !http) {
    return absl::InvalidArgumentError("url: must start with https:// (or http:// to loopback)");
  }
  const std::string rest = url.substr(https ? 8 : 7);
  const std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string::npos) {
    return absl::InvalidArgumentError(
        "url: must not carry a user name or password (sign the generic format with a secret)");
  }
  const std::string host = authority.rfind('[', 0) == 0
                               ? authority.substr(0, authority.find(']') + 1)
                               : authority.substr(0, authority.find(':'));
  if (host.empty()) return absl::InvalidArgumentError("url: has no host");
  if (http && !IsLoopbackHost(absl::AsciiStrToLower(host))) {
    return absl::InvalidArgumentError(
        absl::StrCat("url: http:// only to a loopback address (127.0.0.1, ::1, localhost), not ",
                     host, ": use https://"));
  }
  return absl::OkStatus();
}

std::string ChatSafeText(const std::string& text) {
  static constexpr std::string_view kEveryone[] = {"channel", "here", "all", "everyone"};
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
    if (c != '@') continue;
    const std::string rest = absl::AsciiStrToLower(text.substr(i + 1, 9));
    for (const std::string_view word : kEveryone) {
      // The word alone ("@here", "@here:"), not the start of a name ("@allison").
      const bool alone = rest.size() == word.size() ||
                         (rest.size() > word.size() &&
                          !absl::ascii_isalnum(static_cast<unsigned char>(rest[word.size()])) &&
                          rest[word.size()] != '_');
      if (rest.rfind(word, 0) == 0 && alone) {
        out += "\xE2\x80\x8B";  // U+200B, zero-width space
        break;
      }
    }
  }
  return out;
}

std::string EventName(v1::NotificationEvent event) {
  const std::string name = v1::NotificationEvent_Name(event);
  constexpr std::string_view kPrefix = "NOTIFICATION_EVENT_";
  return name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
}

std::string WebhookSignature(const std::string& secret, const std::string& timestamp,
                             const std::string& body) {
  const std::string signed_text = absl::StrCat(timestamp, ".", body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac,
       &length);
  return absl::StrCat("sha256=",
                      absl::BytesToHexString(std::string(reinterpret_cast<char*>(mac), length)));
}

WebhookRequest RenderWebhook(const v1::Subscription& subscription, const std::string& secret,
                             const v1::Notification& n, absl::Time now) {
  WebhookRequest request;
  request.url = subscription.url();
  nlohmann::json body;
  if (subscription.format() == v1::WEBHOOK_FORMAT_SLACK) {
    body["text"] = ChatSafeText(n.text());
  } else {
    body["id"] = n.id();
    body["subscription_id"] = n.subscription_id();
    body["event"] = EventName(n.event());
    body["subject"] = n.subject();
    body["text"] = n.text();
    body["event_time"] =
        absl::FormatTime(absl::RFC3339_full, FromProtoTime(n.event_time()), absl::UTCTimeZone());
  }
  // Invalid UTF-8 (a run name cannot hold any, but a message might) is replaced, not thrown on.
  request.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string timestamp = absl::StrCat(absl::ToUnixSeconds(now));
  request.headers = {{"Content-Type", "application/json"},
                     {"User-Agent", "tessera-notifier"},
                     {"X-Tessera-Delivery", absl::StrCat(n.id())},
                     {"X-Tessera-Event", EventName(n.event())},
                     {"X-Tessera-Timestamp", timestamp}};
  if (!secret.empty()) {
    request.headers.emplace_back("X-Tessera-Signature",
                                 WebhookSignature(secret, timestamp, request.body));
  }
  return request;
}

}  // namespace tessera::notify
