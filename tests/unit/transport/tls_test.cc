// TLS: the flags are checked before anything listens (every missing or wrong file named, plain
// text refused off loopback), the cluster CA signs what a node may be and nothing else, and a
// renewed certificate is served without a restart. Certificates come from deploy/tls-certs.sh.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "tests/support/process.h"
#include "tests/support/test_pki.h"
#include "transport/tls/certificate_authority.h"
#include "transport/tls/server_ssl_context.h"
#include "transport/tls/tls_flags.h"

namespace tessera::tls {
namespace tls_test {

using testing::RunShell;
using testing::TestPki;

// Whether `cert` chains to the test CA for `purpose` (openssl verify's "sslclient", "sslserver").
bool ChainsFor(const TestPki& pki, const std::string& cert, const std::string& purpose) {
  return RunShell("openssl verify -CAfile " + pki.ca() + " -purpose " + purpose + " " + cert)
             .exit_code == 0;
}

TlsFlags ServicesFlags(const TestPki& pki) {
  return TlsFlags{pki.services_cert(), pki.services_key(), pki.ca(), false};
}

TEST_CASE("loopback hosts and the host of an address") {
  for (const char* h : {"127.0.0.1", "127.8.9.10", "::1", "localhost", "LOCALHOST"}) {
    INFO(h);
    CHECK(IsLoopbackHost(h));
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "::", "example.com", "128.0.0.1", ""}) {
    INFO(h);
    CHECK_FALSE(IsLoopbackHost(h));
  }
  CHECK(HostOf("127.0.0.1:50051") == "127.0.0.1");
  CHECK(HostOf("[::1]:50051") == "::1");
  CHECK(HostOf("https://tessera.example.com:443") == "tessera.example.com");
  CHECK(HostOf("ipv4:10.0.0.1:80") == "10.0.0.1");
}

TEST_CASE("plain text is an explicit choice, for loopback addresses only") {
  TlsFlags plain;
  plain.plaintext = true;
  CHECK(CheckTlsFlags(plain, {{"--grpc-listen", "127.0.0.1:50051"},
                              {"--endpoint", "127.0.0.1:1,[::1]:2"},
                              {"--unused", ""}})
            .ok());
  const auto st = CheckTlsFlags(plain, {{"--grpc-listen", "0.0.0.0:50051"}});
  REQUIRE(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "--grpc-listen 0.0.0.0:50051"));
  CHECK(absl::StrContains(st.message(), "loopback"));
  CHECK(absl::IsInvalidArgument(
      CheckTlsFlags(plain, {{"--scheduler-endpoint", "127.0.0.1:1,10.0.0.2:2"}})));
  plain.ca_file = "/some/ca.pem";
  CHECK(absl::StrContains(CheckTlsFlags(plain, {}).message(), "contradict"));
}

TEST_CASE("TLS needs a certificate, its key and the CA, each named when wrong") {
  TestPki pki;
  CHECK(CheckTlsFlags(ServicesFlags(pki), {{"--grpc-listen", "0.0.0.0:50051"}}).ok());

  TlsFlags none;
  auto st = CheckTlsFlags(none, {});
  REQUIRE(absl::IsInvalidArgument(st));
  CHECK(absl::StrContains(st.message(), "--tls-cert is required"));
  CHECK(absl::StrContains(st.message(), "--plaintext"));

  TlsFlags missing_ca = ServicesFlags(pki);
  missing_ca.ca_file.clear();
  CHECK(absl::StrContains(CheckTlsFlags(missing_ca, {}).message(), "--tls-ca is required"));

  TlsFlags unreadable = ServicesFlags(pki);
  unreadable.cert_file = pki.dir() + "/nope.pem";
  CHECK(absl::StrContains(CheckTlsFlags(unreadable, {}).message(), "nope.pem: cannot be read"));

  // Another certificate's key.
  const auto [node_cert, node_key] = pki.NodeCertificate("n1");
  TlsFlags mismatched = ServicesFlags(pki);
  mismatched.key_file = node_key;
  st = CheckTlsFlags(mismatched, {});
  CHECK(absl::StrContains(st.message(), "--tls-key"));
  CHECK(absl::StrContains(st.message(), "is not the key of the certificate"));

  TlsFlags not_pem = ServicesFlags(pki);
  not_pem.ca_file = pki.services_key();
  CHECK(absl::StrContains(CheckTlsFlags(not_pem, {}).message(), "is not a PEM certificate"));
}

TEST_CASE("a listener's own server certificate: a node's is refused, a metrics one served") {
  TestPki pki;
  const auto [metrics_cert, metrics_key] = pki.MetricsCertificate("gpu-7");
  CHECK(
      CheckServingCertificate("--metrics-tls-cert", metrics_cert, "--metrics-tls-key", metrics_key)
          .ok());
  CHECK(
      CheckServingCertificate("--x-cert", pki.services_cert(), "--x-key", pki.services_key()).ok());
  // A node's own certificate proves the node and serves nothing.
  const auto [node_cert, node_key] = pki.NodeCertificate("gpu-7");
  const absl::Status node =
      CheckServingCertificate("--metrics-tls-cert", node_cert, "--metrics-tls-key", node_key);
  CHECK(absl::IsInvalidArgument(node));
  CHECK(absl::StartsWith(node.message(),
                         "--metrics-tls-cert: " + node_cert + ": is not a server certificate"));
  // A key of another certificate, and a key that is no key, are named by their flag.
  CHECK(absl::StrContains(
      CheckServingCertificate("--metrics-tls-cert", metrics_cert, "--metrics-tls-key", node_key)
          .message(),
      "--metrics-tls-key: " + node_key + ": is not the key of the certificate"));
  CHECK(absl::StrContains(
      CheckServingCertificate("--metrics-tls-cert", metrics_cert, "--metrics-tls-key", metrics_cert)
          .message(),
      "--metrics-tls-key: " + metrics_cert + ": is not a PEM private key"));
  // What the script made: a server certificate for the node's name only, never localhost.
  auto text = RunShell("openssl x509 -noout -text -in " + metrics_cert);
  REQUIRE(text.exit_code == 0);
  CHECK(absl::StrContains(text.output, "DNS:gpu-7"));
  CHECK_FALSE(absl::StrContains(text.output, "localhost"));
  CHECK_FALSE(absl::StrContains(text.output, "127.0.0.1"));
  CHECK(absl::StrContains(text.output, "TLS Web Server Authentication"));
  CHECK_FALSE(absl::StrContains(text.output, "TLS Web Client Authentication"));
  // And the script's node certificate, like the CA's, is a client's only.
  CHECK_FALSE(ChainsFor(pki, node_cert, "sslserver"));
  CHECK(ChainsFor(pki, node_cert, "sslclient"));
}

TEST_CASE("the CA signs a node's request as that node, and nothing more") {
  TestPki pki;
  auto ca = CertificateAuthority::Load(pki.ca(), pki.ca_key());
  REQUIRE(ca.ok());
  auto pair = MakeKeyAndCsr("CN=anything the node asks for");
  REQUIRE(pair.ok());
  const absl::Time now = absl::Now();
  auto cert = (*ca)->SignNodeCertificate(pair->csr_pem, "gpu-07", now, absl::Hours(24));
  REQUIRE(cert.ok());
  auto info = ReadCertificateInfo(cert->pem);
  REQUIRE(info.ok());
  CHECK(info->common_name == "node:gpu-07");  // the request's subject is ignored
  CHECK(absl::AbsDuration(info->not_after - (now + absl::Hours(24))) <= absl::Seconds(2));
  CHECK(info->not_before < now);
  CHECK(cert->not_after == info->not_after);

  testing::TempDir dir;
  const std::string cert_file = dir.Write("node.pem", cert->pem);
  // It chains to the CA as a client certificate, never a server's; it is no CA and names only
  // its node.
  CHECK(ChainsFor(pki, cert_file, "sslclient"));
  CHECK_FALSE(ChainsFor(pki, cert_file, "sslserver"));
  auto text = RunShell("openssl x509 -noout -text -in " + cert_file);
  REQUIRE(text.exit_code == 0);
  CHECK(absl::StrContains(text.output, "CA:FALSE"));
  CHECK(absl::StrContains(text.output, "DNS:gpu-07"));
  CHECK_FALSE(absl::StrContains(text.output, "IP Address"));
  CHECK(absl::StrContains(text.output, "TLS Web Client Authentication"));
  CHECK_FALSE(absl::StrContains(text.output, "TLS Web Server Authentication"));
  // The private key stayed with the caller: the certificate is for the request's key.
  const std::string key_file = dir.Write("node.key", pair->key_pem);
  CHECK(RunShell("test \"$(openssl x509 -noout -pubkey -in " + cert_file +
                 ")\" = \"$(openssl pkey -pubout -in " + key_file + ")\"")
            .exit_code == 0);
}

TEST_CASE("the CA refuses requests that are not what they claim, or weak") {
  TestPki pki;
  auto ca = CertificateAuthority::Load(pki.ca(), pki.ca_key());
  REQUIRE(ca.ok());
  const absl::Time now = absl::Now();
  CHECK(
      absl::IsInvalidArgument((*ca)->SignNodeCertificate("", "n1", now, absl::Hours(1)).status()));
  CHECK(
      absl::IsInvalidArgument((*ca)
                                  ->SignNodeCertificate("-----BEGIN CERTIFICATE REQUEST-----\nxx\n",
                                                        "n1", now, absl::Hours(1))
                                  .status()));
  testing::TempDir dir;
  auto weak = RunShell("openssl req -new -newkey rsa:1024 -nodes -subj /CN=x -keyout " + dir.path +
                       "/k -out " + dir.path + "/r 2>&1 && cat " + dir.path + "/r");
  REQUIRE(weak.exit_code == 0);
  const std::string weak_csr = weak.output.substr(weak.output.find("-----BEGIN"));
  auto refused = (*ca)->SignNodeCertificate(weak_csr, "n1", now, absl::Hours(1));
  REQUIRE(absl::IsInvalidArgument(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), "1024 bits"));
  // A request whose signature does not match its key (taken from someone else's request).
  auto a = MakeKeyAndCsr("a");
  REQUIRE(a.ok());
  std::string tampered = a->csr_pem;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  CHECK_FALSE((*ca)->SignNodeCertificate(tampered, "n1", now, absl::Hours(1)).ok());
}

TEST_CASE("the CA's key must be private, and be the CA's") {
  TestPki pki;
  REQUIRE(::chmod(pki.ca_key().c_str(), 0644) == 0);
  auto open = CertificateAuthority::Load(pki.ca(), pki.ca_key());
  REQUIRE(absl::IsFailedPrecondition(open.status()));
  CHECK(absl::StrContains(open.status().message(), "chmod 600"));
  REQUIRE(::chmod(pki.ca_key().c_str(), 0600) == 0);
  auto not_ca = CertificateAuthority::Load(pki.services_cert(), pki.services_key());
  REQUIRE(absl::IsInvalidArgument(not_ca.status()));
  CHECK(absl::StrContains(not_ca.status().message(), "not a CA"));
  auto wrong_key = CertificateAuthority::Load(pki.ca(), pki.services_key());
  REQUIRE(absl::IsInvalidArgument(wrong_key.status()));
  CHECK(absl::StrContains(wrong_key.status().message(), "--tls-ca-key"));
}

TEST_CASE("an HTTPS listener's renewed certificate is used for new connections") {
  TestPki pki;
  auto ctx = ServerSslContext::Create(ServicesFlags(pki));
  REQUIRE(ctx.ok());
  const auto first = (*ctx)->Current();
  CHECK((*ctx)->Current() == first);
  pki.RenewServices();
  std::shared_ptr<boost::asio::ssl::context> later = first;
  for (int i = 0; i < 40 && later == first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    later = (*ctx)->Current();
  }
  CHECK(later != first);
  // A half-written pair keeps the last good context.
  testing::TempDir dir;
  TlsFlags broken = ServicesFlags(pki);
  broken.cert_file = dir.Write("c.pem", "");
  CHECK_FALSE(ServerSslContext::Create(broken).ok());
}

}  // namespace tls_test
}  // namespace tessera::tls
