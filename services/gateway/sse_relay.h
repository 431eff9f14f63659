#pragma once
// Relays an EventSource to a client as Server-Sent Events, on the connection's thread.

#include <chrono>
#include <memory>
#include <optional>

#include "services/gateway/event_source.h"
#include "services/gateway/http_types.h"
#include "services/gateway/polled_stream.h"

namespace tessera::gateway {

struct RelayOptions {
  // A comment line goes out when no event has for this long (keeps proxies from timing the
  // stream out, and finds clients that vanished without closing).
  std::chrono::milliseconds keepalive{15000};
  // The response head goes out when the upstream accepts the stream, or after this long
  // (an upstream that sends no initial metadata before its first message).
  std::chrono::milliseconds head_delay{1000};
  // Each write to the client must finish within this.
  std::chrono::milliseconds write_timeout{30000};
};

struct RelayOutcome {
  // Set when the stream failed before anything was sent: the caller writes this instead.
  std::optional<Response> response;
  int status = 200;  // for the access log
  int events = 0;    // events delivered
  bool client_gone = false;
};

// Starts `source` and forwards it until it ends, the client disconnects (the source is
// cancelled, which cancels the gRPC call), or the stream's wake descriptor fires (shutdown).
// The source is destroyed (after gRPC is done with it) before this returns.
RelayOutcome RelayEvents(PolledStream& client, std::unique_ptr<EventSource> source,
                         const RelayOptions& options);

// "event: <e>\nid: <id>\ndata: <data>\n\n" (data split on newlines, one data: line each).
std::string FormatEvent(const SseEvent& event);

}  // namespace tessera::gateway
