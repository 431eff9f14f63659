#include "services/gateway/sse_relay.h"

namespace tessera::gateway {

const char kEventStreamHead[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: tessera-gateway\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "Connection: close\r\n"
    "\r\n";

std::string FormatEvent(const SseEvent& event) {
  std::string out;
  if (!event.event.empty()) out += "event: " + event.event + "\n";
  if (!event.id.empty()) out += "id: " + event.id + "\n";
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = event.data.find('\n', start);
    out += "data: " + event.data.substr(start, nl == std::string::npos ? nl : nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  out += "\n";
  return out;
}

}  // namespace tessera::gateway
