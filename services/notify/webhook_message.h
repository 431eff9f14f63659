#pragma once
// What a webhook delivery sends: the URL's rules, the body in the subscription's format, and the
// headers, signed for the generic format:
//
//   Content-Type: application/json
//   User-Agent: tessera-notifier
//   X-Tessera-Delivery: 1234            the notification's id: a receiver drops repeats by it
//   X-Tessera-Event: RUN_FAILED
//   X-Tessera-Timestamp: 1764470000     Unix seconds when sent (receivers refuse stale ones)
//   X-Tessera-Signature: sha256=HEX     HMAC-SHA256(secret, timestamp + "." + body), if signed
//
// Slack's incoming webhooks (and Mattermost's, and Discord's /slack endpoints) take {"text": ...};
// the generic body carries every field of the notification.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tessera/v1/notifications.pb.h"

namespace tessera::notify {

struct WebhookRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// https:// anywhere, or http:// to a loopback address only (a relay on the same machine, a
// test's receiver): notifications name runs and nodes, which do not cross a network in clear.
// No user name or password in the URL (a secret in a database row in clear), at most 2,048
// bytes. INVALID_ARGUMENT naming what is wrong.
absl::Status CheckWebhookUrl(const std::string& url);

// The request delivering `n` to `subscription` at `now`, signed with `secret` when not empty.
WebhookRequest RenderWebhook(const v1::Subscription& subscription, const std::string& secret,
                             const v1::Notification& n, absl::Time now);

// "sha256=" + lowercase hex of HMAC-SHA256(secret, timestamp + "." + body).
std::string WebhookSignature(const std::string& secret, const std::string& timestamp,
                             const std::string& body);

// `text` as chat text that only says what it says: a notification quotes what strangers wrote (a
// rank's loss rollback reason, an exit message, a run's name), and Slack reads <...> as a link or
// a mention (<!channel>, <@U123>, <https://x|click here>) and Mattermost and Discord read
// @channel, @here, @all and @everyone as mentions of everyone. &, < and > become Slack's escapes
// (&amp; &lt; &gt;), and a zero-width space after such an @ keeps it from mentioning everyone
// (an @name of one person is left as it is: it pings that person only, as the text says).
std::string ChatSafeText(const std::string& text);

// "RUN_FAILED" for NOTIFICATION_EVENT_RUN_FAILED.
std::string EventName(v1::NotificationEvent event);

}  // namespace tessera::notify
