// What a webhook delivery sends: the URL rules, the bodies of both formats, the signature.
#include "services/notify/webhook_message.h"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "base/timestamps.h"

namespace tessera::notify {
namespace webhook_message_test {

std::map<std::string, std::string> Headers(const WebhookRequest& r) {
  return {r.headers.begin(), r.headers.end()};
}

v1::Notification Failed() {
  v1::Notification n;
  n.set_id(42);
  n.set_subscription_id("wh-1");
  n.set_event(v1::NOTIFICATION_EVENT_RUN_FAILED);
  n.set_subject("run/gpt-1");
  n.set_text("Run gpt-1 failed: rank 3 exited with code 1");
  *n.mutable_event_time() = ToProtoTime(absl::FromUnixSeconds(1'700'000'000));
  return n;
}

TEST_CASE("webhook URLs: https anywhere, http only to loopback, nothing hidden in them") {
  CHECK(CheckWebhookUrl("https://hooks.slack.com/services/T0/B0/xyz").ok());
  CHECK(CheckWebhookUrl("http://127.0.0.1:8080/hook").ok());
  CHECK(CheckWebhookUrl("http://localhost/hook").ok());
  CHECK(CheckWebhookUrl("http://[::1]:9000/").ok());
  CHECK(CheckWebhookUrl("https://[2001:db8::1]:8443/x").ok());
  const auto message = [](const std::string& url) {
    return std::string(CheckWebhookUrl(url).message());
  };
  CHECK(message("") == "url: required");
  CHECK(message("http://hooks.example.com/x") ==
        "url: http:// only to a loopback address (127.0.0.1, ::1, localhost), not "
        "hooks.example.com: use https://");
  CHECK(message("ftp://example.com") == "url: must start with https:// (or http:// to loopback)");
  CHECK(message("https://user:pw@example.com/") ==
        "url: must not carry a user name or password (sign the generic format with a secret)");
  CHECK(message("https://example.com/a b") == "url: must not contain spaces or control characters");
  CHECK(message("https:///path") == "url: has no host");
  CHECK(message("https://e.com/" + std::string(3000, 'a')) ==
        "url: 3014 bytes, over the limit of 2048");
  // A host that only starts like loopback is not loopback... but 127.x.y.z all are.
  CHECK(CheckWebhookUrl("http://127.0.0.2/").ok());
  CHECK_FALSE(CheckWebhookUrl("http://localhost.example.com/").ok());
}

TEST_CASE("the slack format carries the text, the generic one every field, signed") {
  v1::Subscription slack;
  slack.set_url("https://hooks.slack.com/services/T0/B0/xyz");
  slack.set_format(v1::WEBHOOK_FORMAT_SLACK);
  const absl::Time now = absl::FromUnixSeconds(1'700'000'100);
  const WebhookRequest s = RenderWebhook(slack, "", Failed(), now);
  CHECK(s.url == slack.url());
  CHECK(nlohmann::json::parse(s.body) ==
        nlohmann::json{{"text", "Run gpt-1 failed: rank 3 exited with code 1"}});
  auto h = Headers(s);
  CHECK(h.at("Content-Type") == "application/json");
  CHECK(h.at("X-Tessera-Delivery") == "42");
  CHECK(h.at("X-Tessera-Event") == "RUN_FAILED");
  CHECK(h.at("X-Tessera-Timestamp") == "1700000100");
  CHECK(h.count("X-Tessera-Signature") == 0);

  v1::Subscription generic = slack;
  generic.set_format(v1::WEBHOOK_FORMAT_GENERIC);
  const std::string secret = "0123456789abcdef";
  const WebhookRequest g = RenderWebhook(generic, secret, Failed(), now);
  const auto body = nlohmann::json::parse(g.body);
  CHECK(body.at("id") == 42);
  CHECK(body.at("subscription_id") == "wh-1");
  CHECK(body.at("event") == "RUN_FAILED");
  CHECK(body.at("subject") == "run/gpt-1");
  CHECK(body.at("event_time") == "2023-11-14T22:13:20+00:00");
  h = Headers(g);
  CHECK(h.at("X-Tessera-Signature") == WebhookSignature(secret, "1700000100", g.body));
}

TEST_CASE("the signature is HMAC-SHA256 over timestamp.body, as receivers compute it") {
  // python3: hmac.new(b'0123456789abcdef', b'1700000000.{"text":"hi"}', hashlib.sha256)
  CHECK(WebhookSignature("0123456789abcdef", "1700000000", R"({"text":"hi"})") ==
        "sha256=f3fbef9e6dd9321e73dc29c58e566ffc6b7f9a39c12eabc86e4133ab42f3513d");
}

TEST_CASE("a message that is not UTF-8 is sent with replacement characters, not dropped") {
  v1::Subscription slack;
  slack.set_format(v1::WEBHOOK_FORMAT_SLACK);
  v1::Notification n = Failed();
  n.set_text("Run x failed: \xff\xfe");
  const WebhookRequest r = RenderWebhook(slack, "", n, absl::UnixEpoch());
  CHECK(nlohmann::json::parse(r.body).at("text") == "Run x failed: \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("chat text quoting a stranger can neither link nor mention everyone") {
  v1::Subscription slack;
  slack.set_format(v1::WEBHOOK_FORMAT_SLACK);
  v1::Notification n = Failed();
  // A rank's loss rollback reason, as it wrote it.
  n.set_text(
      "Run x: loss rollback: <!channel> see <https://evil.example|the fix> & @here @Everyone");
  const WebhookRequest r = RenderWebhook(slack, "", n, absl::UnixEpoch());
  const std::string zwsp = "\xE2\x80\x8B";
  CHECK(nlohmann::json::parse(r.body).at("text") ==
        "Run x: loss rollback: &lt;!channel&gt; see &lt;https://evil.example|the fix&gt; &amp; @" +
            zwsp + "here @" + zwsp + "Everyone");
  // Plain text and addresses are left as they are.
  CHECK(ChatSafeText("Run gpt-1 failed: rank 3 exited with code 1") ==
        "Run gpt-1 failed: rank 3 exited with code 1");
  CHECK(ChatSafeText("mail ops@example.com") == "mail ops@example.com");
  CHECK(ChatSafeText("@al") == "@al");
  CHECK(ChatSafeText("ask @allison or @channels_bot") == "ask @allison or @channels_bot");
  CHECK(ChatSafeText("@here: the loss is nan") == "@" + zwsp + "here: the loss is nan");
  CHECK(ChatSafeText("@ALL") == "@" + zwsp + "ALL");
  // The generic format carries the text as it is: its receiver is a program.
  v1::Subscription generic;
  generic.set_format(v1::WEBHOOK_FORMAT_GENERIC);
  CHECK(nlohmann::json::parse(RenderWebhook(generic, "", n, absl::UnixEpoch()).body).at("text") ==
        n.text());
}

}  // namespace webhook_message_test
}  // namespace tessera::notify
