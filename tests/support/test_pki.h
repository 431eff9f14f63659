#pragma once
// A cluster's certificates for a test, made the way operators make them (deploy/tls-certs.sh,
// real openssl) in a temporary folder: the CA, the services' certificate, and node and metrics
// certificates on demand. Also the TLS flags that go with them, for tessera-server and
// tessera-worker.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace tessera::testing {

class TestPki {
 public:
  TestPki();

  std::string ca() const { return dir_.path + "/ca.pem"; }
  std::string ca_key() const { return dir_.path + "/ca.key"; }
  std::string services_cert() const { return dir_.path + "/services.pem"; }
  std::string services_key() const { return dir_.path + "/services.key"; }
  const std::string& dir() const { return dir_.path; }

  // Makes (or renews) the certificate of node `name`: {cert, key}.
  std::pair<std::string, std::string> NodeCertificate(const std::string& name) const;
  // Makes (or renews) the server certificate node `name`'s worker serves /metrics with.
  std::pair<std::string, std::string> MetricsCertificate(const std::string& name) const;
  // Makes the services' certificate again (a renewal: new key, new serial).
  void RenewServices() const;

  // --tls-cert/--tls-key/--tls-ca of the services (the CA's key too when `sign_nodes`).
  std::vector<std::string> ServerFlags(bool sign_nodes = true) const;

 private:
  TempDir dir_{"tessera-pki"};
};

// A channel to `endpoint` over TLS, checking the server against `ca`; with `cert` and `key`, it
// shows that client certificate (mutual TLS).
std::shared_ptr<grpc::Channel> TlsChannel(const std::string& endpoint, const std::string& ca,
                                          const std::string& cert = "",
                                          const std::string& key = "");

// The contents of a file.
std::string ReadFile(const std::string& path);

// The serial number of the certificate a TLS listener on 127.0.0.1:`port` serves (openssl
// s_client), checked against `ca`; empty when the handshake fails.
std::string ServedCertificateSerial(int port, const std::string& ca);

}  // namespace tessera::testing
