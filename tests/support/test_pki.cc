#include "tests/support/test_pki.h"

#include <catch2/catch.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "tests/support/binaries.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

void Certs(const std::vector<std::string>& args) {
  const absl::Status made = TlsCerts(args);
  INFO("deploy/tls-certs.sh " << absl::StrJoin(args, " ") << ": " << made);
  REQUIRE(made.ok());
}

}  // namespace

TestPki::TestPki() {
  const absl::Status made = MakeClusterCertificates(dir_.path);
  INFO(made);
  REQUIRE(made.ok());
}

std::pair<std::string, std::string> TestPki::NodeCertificate(const std::string& name) const {
  Certs({"node", dir_.path, name});
  return {dir_.path + "/node-" + name + ".pem", dir_.path + "/node-" + name + ".key"};
}

std::pair<std::string, std::string> TestPki::MetricsCertificate(const std::string& name) const {
  Certs({"metrics", dir_.path, name});
  return {dir_.path + "/metrics-" + name + ".pem", dir_.path + "/metrics-" + name + ".key"};
}

void TestPki::RenewServices() const { Certs({"services", dir_.path}); }

std::vector<std::string> TestPki::ServerFlags(bool sign_nodes) const {
  std::vector<std::string> flags = {"--tls-cert",   services_cert(), "--tls-key",
                                    services_key(), "--tls-ca",      ca()};
  if (sign_nodes) {
    flags.push_back("--tls-ca-key");
    flags.push_back(ca_key());
  }
  return flags;
}

std::string ReadFile(const std::string& path) {
  auto contents = ReadWholeFile(path);
  INFO(contents.status());
  REQUIRE(contents.ok());
  return *std::move(contents);
}

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& endpoint, const std::string& ca,
                                          const std::string& cert, const std::string& key) {
  grpc::SslCredentialsOptions options;
  if (!ca.empty()) options.pem_root_certs = ReadFile(ca);
  if (!cert.empty()) {
    options.pem_cert_chain = ReadFile(cert);
    options.pem_private_key = ReadFile(key);
  }
  return grpc::CreateChannel(endpoint, grpc::SslCredentials(options));
}

std::string ServedCertificateSerial(int port, const std::string& ca) {
  const ShellResult r = RunShell(absl::StrCat(
      "echo | openssl s_client -connect 127.0.0.1:", port, " -servername localhost -CAfile ", ca,
      " -verify_return_error 2>/dev/null | openssl x509 -noout -serial 2>/dev/null"));
  if (r.exit_code != 0) return "";
  return std::string(absl::StripAsciiWhitespace(r.output));
}

}  // namespace tessera::testing
