#pragma once
// The cluster CA as the control plane uses it: it signs the certificate of a node that joined
// (NodeJoin.Join) or renews one, from a request made on the node, so a node's private key never
// leaves it. What a certificate may say is decided here, not by the request: the subject is
// "CN=node:NAME" with the node's name as its one DNS name, it is not a CA, and it expires.
// Also the node side: making a key pair and its certificate signing request.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::tls {

struct IssuedCertificate {
  std::string pem;
  absl::Time not_after;
};

class CertificateAuthority {
 public:
  // Loads the CA's certificate and private key (PEM). INVALID_ARGUMENT naming the flag and the
  // file when either does not load, the key is not the certificate's, or the certificate is not
  // a CA; FAILED_PRECONDITION when someone other than this user could read the key.
  static absl::StatusOr<std::shared_ptr<CertificateAuthority>> Load(const std::string& cert_file,
                                                                    const std::string& key_file);
  ~CertificateAuthority();
  CertificateAuthority(const CertificateAuthority&) = delete;
  CertificateAuthority& operator=(const CertificateAuthority&) = delete;

  // A certificate for `node` (CN "node:NAME", DNS name NAME, client and server use) for the
  // public key of `csr_pem`, valid from a few minutes before `now` for `validity` (never past
  // the CA's own expiry). INVALID_ARGUMENT when the request does not parse, its signature does
  // not verify (whoever sent it does not hold the key), or its key is weak (RSA under 2048
  // bits, or not RSA nor EC).
  absl::StatusOr<IssuedCertificate> SignNodeCertificate(const std::string& csr_pem,
                                                        const std::string& node, absl::Time now,
                                                        absl::Duration validity) const;

  // The CA's certificate, PEM.
  const std::string& ca_pem() const { return ca_pem_; }

 private:
  struct Keys;
  CertificateAuthority(std::unique_ptr<Keys> keys, std::string ca_pem);
  std::unique_ptr<Keys> keys_;
  std::string ca_pem_;
};

// A new EC P-256 key pair (PEM, unencrypted) and a certificate signing request for it naming
// `common_name`, signed with the key.
struct KeyAndCsr {
  std::string key_pem;
  std::string csr_pem;
};
absl::StatusOr<KeyAndCsr> MakeKeyAndCsr(const std::string& common_name);

// When a PEM certificate starts and stops being valid, and its subject's CN; INVALID_ARGUMENT
// when it does not parse.
struct CertificateInfo {
  absl::Time not_before;
  absl::Time not_after;
  std::string common_name;
};
absl::StatusOr<CertificateInfo> ReadCertificateInfo(const std::string& pem);

}  // namespace tessera::tls
