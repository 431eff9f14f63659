#include "transport/tls/tls_flags.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "transport/endpoints.h"

namespace tessera::tls {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

absl::Status Invalid(const std::string& flag, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": ", why));
}

absl::StatusOr<File> OpenPem(const std::string& flag, const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag,
                     " is required: Tessera serves and calls over TLS (or give --plaintext, for "
                     "loopback addresses only)"));
  }
  File f(std::fopen(path.c_str(), "r"));
  if (f == nullptr) return Invalid(flag, path, "cannot be read");
  return f;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

// The certificate of `cert_flag` and the key of `key_flag`, checked to be a pair.
absl::StatusOr<X509Ptr> LoadCertificateAndKey(const std::string& cert_flag,
                                              const std::string& cert_path,
                                              const std::string& key_flag,
                                              const std::string& key_path) {
  auto cert_file = OpenPem(cert_flag, cert_path);
  if (!cert_file.ok()) return cert_file.status();
  X509Ptr cert(PEM_read_X509(cert_file->get(), nullptr, nullptr, nullptr), X509_free);
  if (cert == nullptr) return Invalid(cert_flag, cert_path, "is not a PEM certificate");

  auto key_file = OpenPem(key_flag, key_path);
  if (!key_file.ok()) return key_file.status();
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_PrivateKey(key_file->get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (key == nullptr) {
    return Invalid(key_flag, key_path, "is not a PEM private key (without a passphrase)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Invalid(key_flag, key_path,
                   absl::StrCat("is not the key of the certificate ", cert_path));
  }
  return cert;
}

absl::Status CheckCertificateAndKey(const TlsFlags& flags) {
  return LoadCertificateAndKey("--tls-cert", flags.cert_file, "--tls-key", flags.key_file).status();
}

}  // namespace

absl::Status CheckServingCertificate(const std::string& cert_flag, const std::string& cert_path,
                                     const std::string& key_flag, const std::string& key_path) {
  auto cert = LoadCertificateAndKey(cert_flag, cert_path, key_flag, key_path);
  if (!cert.ok()) return cert.status();
  // 1: a server certificate; 0: its extended key usage leaves serverAuth out (a node's own).
  if (X509_check_purpose(cert->get(), X509_PURPOSE_SSL_SERVER, 0) != 1) {
    ERR_clear_error();
    return Invalid(cert_flag, cert_path,
                   "is not a server certificate (its extended key usage has no serverAuth): a "
                   "node's own certificate is for calling the control plane only; make one with "
                   "deploy/tls-certs.sh metrics");
  }
  return absl::OkStatus();
}

void AddTlsFlags(CLI::App& app, TlsFlags& flags) {
  app.add_option("--tls-cert", flags.cert_file,
                 "PEM certificate this process serves and shows to the services it calls "
                 "(reloaded when the file changes)")
      ->envname("TESSERA_TLS_CERT");
  app.add_option("--tls-key", flags.key_file, "PEM private key of --tls-cert")
      ->envname("TESSERA_TLS_KEY");
  app.add_option("--tls-ca", flags.ca_file,
                 "PEM certificates of the cluster CA, which every peer's certificate must chain to")
      ->envname("TESSERA_TLS_CA");
  app.add_flag("--plaintext", flags.plaintext,
               "no TLS: allowed only when every address is loopback (127.0.0.1, ::1, localhost)");
}

bool IsLoopbackHost(std::string_view host) {
  const std::string h = absl::AsciiStrToLower(std::string(host));
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::string HostOf(std::string_view address) {
  std::string a(address);
  if (const auto scheme = a.find("://"); scheme != std::string::npos) a = a.substr(scheme + 3);
  if (absl::StartsWith(a, "ipv4:") || absl::StartsWith(a, "ipv6:")) a = a.substr(5);
  if (!a.empty() && a.front() == '[') {
    const auto close = a.find(']');
    return close == std::string::npos ? a : a.substr(1, close - 1);
  }
  const auto colon = a.rfind(':');
  return colon == std::string::npos ? a : a.substr(0, colon);
}

std::optional<std::string> FirstNonLoopback(std::string_view endpoints) {
  for (const std::string& e : SplitEndpoints(endpoints)) {
    if (!IsLoopbackHost(HostOf(e))) return e;
  }
  return std::nullopt;
}

absl::Status CheckTlsFlags(const TlsFlags& flags, const std::vector<NamedAddress>& addresses) {
  if (flags.plaintext) {
    for (const auto& [flag, value] :
         {std::pair<const char*, const std::string&>{"--tls-cert", flags.cert_file},
          {"--tls-key", flags.key_file},
          {"--tls-ca", flags.ca_file}}) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--plaintext and ", flag, " contradict each other: choose one"));
      }
    }
    for (const NamedAddress& a : addresses) {
      if (auto remote = FirstNonLoopback(a.address)) {
        return absl::InvalidArgumentError(absl::StrCat(
            a.flag, " ", *remote,
            ": --plaintext is allowed only on loopback addresses (127.0.0.1, ::1, localhost); "
            "serve TLS with --tls-cert, --tls-key and --tls-ca"));
      }
    }
    return absl::OkStatus();
  }
  if (auto st = CheckCertificateAndKey(flags); !st.ok()) return st;
  auto ca_file = OpenPem("--tls-ca", flags.ca_file);
  if (!ca_file.ok()) return ca_file.status();
  std::unique_ptr<X509, decltype(&X509_free)> ca(
      PEM_read_X509(ca_file->get(), nullptr, nullptr, nullptr), X509_free);
  if (ca == nullptr) return Invalid("--tls-ca", flags.ca_file, "is not a PEM certificate");
  return absl::OkStatus();
}

}  // namespace tessera::tls
