#pragma once
// How a Tessera process secures its connections: its own certificate and key (served on every
// listener, and shown as a client certificate to the services it calls: mutual TLS), and the
// cluster CA that every peer's certificate must chain to. Plain text is an explicit choice
// (--plaintext), allowed only on loopback addresses, where nothing crosses a network.

#include "base/cli_app_fwd.h"
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tessera::tls {

struct TlsFlags {
  std::string cert_file{};  // PEM certificate chain of this process
  std::string key_file{};   // its PEM private key (readable only by this process's user)
  std::string ca_file{};    // PEM certificates of the cluster CA
  bool plaintext = false;

  bool enabled() const { return !plaintext; }
};

// Adds --tls-cert, --tls-key, --tls-ca and --plaintext.
void AddTlsFlags(CLI::App& app, TlsFlags& flags);

// A host that only this machine can reach: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(std::string_view host);

// The host of "host:port", "[v6]:port" or "scheme://host:port".
std::string HostOf(std::string_view address);

// The first endpoint of a list ("a:1,b:2", endpoints.h) that is not on loopback; nullopt when
// there is none (an empty list included).
std::optional<std::string> FirstNonLoopback(std::string_view endpoints);

// What an address is used for, for error messages: {"--grpc-listen", "0.0.0.0:50051"}.
struct NamedAddress {
  std::string flag;
  std::string address;
};

// Checks the flags before anything listens or connects: with TLS, all three files must be set,
// readable PEM, and the key must be the certificate's; with --plaintext, none of them may be
// set and every address must be loopback. INVALID_ARGUMENT naming the flag or the address.
absl::Status CheckTlsFlags(const TlsFlags& flags, const std::vector<NamedAddress>& addresses);

// Checks the certificate a listener serves when it is not the process's own (a worker's
// /metrics: a node's own certificate is a client certificate): readable PEM, the key the
// certificate's, and a certificate a client accepts from a server. INVALID_ARGUMENT naming
// the flag.
absl::Status CheckServingCertificate(const std::string& cert_flag, const std::string& cert_path,
                                     const std::string& key_flag, const std::string& key_path);

}  // namespace tessera::tls
