#pragma once
// The metadata through which a call says for whom it is made.
//
// The REST gateway tells the services its HTTP client's address (for the audit log and the
// limits counted per address). The services believe it only from a peer that is the gateway:
// the in-process channel, or a connection that shows the services' certificate
// (auth/peer_identity.h, OriginOf).
//
// A service calling another with its system key while it serves a person's call (the scheduler
// reading runs for `mcli util`) marks the call as that person's (kUserTrafficMetadata, set by
// PrepareSystemCall from the thread's traffic class): the callee then serves it as user traffic,
// never from the database connections kept for the control plane.

namespace tessera {

inline constexpr char kClientAddressMetadata[] = "x-tessera-client-address";
inline constexpr char kUserTrafficMetadata[] = "x-tessera-for-a-person";

}  // namespace tessera
