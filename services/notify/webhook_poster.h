#pragma once
// Sends a webhook's request and says how the receiver answered. libcurl does the HTTP and TLS
// (the system's CAs, the receiver's certificate and name checked); redirects are not followed (a
// receiver that moved is told by its 3xx, and a signed body never goes to another host).

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "services/notify/webhook_message.h"

namespace tessera::notify {

struct WebhookResponse {
  int http_status = 0;  // 0: no answer (error says why)
  std::string error;    // "timed out after 5s", "connection refused", ...
};

class WebhookPoster {
 public:
  virtual ~WebhookPoster() = default;
  // Thread-safe. Gives up after `timeout` in all (connecting, sending, the answer).
  virtual WebhookResponse Post(const WebhookRequest& request, absl::Duration timeout) = 0;
};

std::shared_ptr<WebhookPoster> MakeCurlWebhookPoster();

}  // namespace tessera::notify
