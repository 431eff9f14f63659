#pragma once
// The metadata through which the REST gateway tells the services its HTTP client's address (for
// the audit log). The services believe it only from a peer that is the gateway: the in-process
// channel, or a connection that shows the services' certificate (auth/audit_log.cc).

namespace tessera {

inline constexpr char kClientAddressMetadata[] = "x-tessera-client-address";

}  // namespace tessera
