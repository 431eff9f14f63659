#include "transport/tls/certificate_authority.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace tessera::tls {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using ReqPtr = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

// OpenSSL's last error as text, and the queue cleared.
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
  }
  return text;
}

absl::Time AsnTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromUnixSeconds(timegm(&tm));
}

// Adds extension `name` = `value` to `cert`, issued by `issuer`.
absl::Status AddExtension(X509* cert, X509* issuer, const char* name, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf(nullptr, &ctx, name, value.c_str());
  if (ext == nullptr) {
    return absl::InternalError(absl::StrCat("certificate extension ", name, ": ", OpenSslError()));
  }
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return absl::InternalError(absl::StrCat("certificate extension ", name));
  return absl::OkStatus();
}

absl::Status CheckKeyStrength(EVP_PKEY* key) {
  const int type = EVP_PKEY_get_base_id(key);
  if (type == EVP_PKEY_EC) return absl::OkStatus();
  if (type == EVP_PKEY_RSA && EVP_PKEY_get_bits(key) >= 2048) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "csr_pem: the key is ", type == EVP_PKEY_RSA ? "RSA of " : "of type ",
      type == EVP_PKEY_RSA ? EVP_PKEY_get_bits(key) : type, type == EVP_PKEY_RSA ? " bits" : "",
      ": use an EC key (P-256 or stronger) or RSA of at least 2048 bits"));
}

}  // namespace

struct CertificateAuthority::Keys {
  X509Ptr cert;
  KeyPtr key;
};

CertificateAuthority::CertificateAuthority(std::unique_ptr<Keys> keys, std::string ca_pem)
    : keys_(std::move(keys)), ca_pem_(std::move(ca_pem)) {}

CertificateAuthority::~CertificateAuthority() = default;

absl::StatusOr<std::shared_ptr<CertificateAuthority>> CertificateAuthority::Load(
    const std::string& cert_file, const std::string& key_file) {
  auto cert_pem = ReadFile("--tls-ca", cert_file);
  if (!cert_pem.ok()) return cert_pem.status();
  struct stat st {};
  if (::stat(key_file.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-ca-key: ", key_file, ": cannot be read"));
  }
  if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tls-ca-key: ", key_file,
                     " must belong to this user and be readable by it alone (chmod 600): it "
                     "signs every credential of the cluster"));
  }
  auto key_pem = ReadFile("--tls-ca-key", key_file);
  if (!key_pem.ok()) return key_pem.status();
  auto keys = std::make_unique<Keys>();
  Bio cert_bio = MemoryBio(*cert_pem);
  keys->cert.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (keys->cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-ca: ", cert_file, ": is not a PEM certificate"));
  }
  if (X509_check_ca(keys->cert.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-ca: ", cert_file, ": is not a CA certificate"));
  }
  Bio key_bio = MemoryBio(*key_pem);
  keys->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (keys->key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-ca-key: ", key_file, ": is not a PEM private key (without a passphrase)"));
  }
  if (X509_check_private_key(keys->cert.get(), keys->key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-ca-key: ", key_file, ": is not the key of the CA ", cert_file));
  }
  return std::shared_ptr<CertificateAuthority>(
      new CertificateAuthority(std::move(keys), *std::move(cert_pem)));
}

absl::StatusOr<IssuedCertificate> CertificateAuthority::SignNodeCertificate(
    const std::string& csr_pem, const std::string& node, absl::Time now,
    absl::Duration validity) const {
  if (csr_pem.empty()) return absl::InvalidArgumentError("csr_pem: required");
  if (csr_pem.size() > 16 * 1024) return absl::InvalidArgumentError("csr_pem: over 16 KiB");
  Bio csr_bio = MemoryBio(csr_pem);
  ReqPtr req(PEM_read_bio_X509_REQ(csr_bio.get(), nullptr, nullptr, nullptr));
  if (req == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("csr_pem: not a PEM certificate signing request");
  }
  EVP_PKEY* public_key = X509_REQ_get0_pubkey(req.get());
  if (public_key == nullptr || X509_REQ_verify(req.get(), public_key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "csr_pem: its signature does not verify with its own key (the sender does not hold it)");
  }
  if (auto st = CheckKeyStrength(public_key); !st.ok()) return st;

  X509Ptr cert(X509_new());
  X509* ca = keys_->cert.get();
  X509_set_version(cert.get(), 2);
  // A random positive 127-bit serial, as RFC 5280 asks (unique, unpredictable).
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1) {
    return absl::InternalError("RAND_bytes failed: no certificate can be made");
  }
  serial_bytes[0] &= 0x7f;
  BnPtr serial(BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr));
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca));
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string cn = "node:" + node;
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  const absl::Time ca_not_after = AsnTime(X509_get0_notAfter(ca));
  const absl::Time not_after = std::min(now + validity, ca_not_after);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), absl::ToTimeT(now - absl::Minutes(5)));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), absl::ToTimeT(not_after));
  X509_set_pubkey(cert.get(), public_key);
  for (const auto& [name, value] : std::initializer_list<std::pair<const char*, std::string>>{
           {"basicConstraints", "critical,CA:FALSE"},
           {"keyUsage", "critical,digitalSignature,keyEncipherment"},
           // A client certificate only: it proves the node to the control plane and can serve
           // nothing, so a node (or whoever took it) cannot pose as a server to anyone.
           {"extendedKeyUsage", "clientAuth"},
           {"subjectAltName", "DNS:" + node},
           {"subjectKeyIdentifier", "hash"},
           {"authorityKeyIdentifier", "keyid"}}) {
    if (auto st = AddExtension(cert.get(), ca, name, value); !st.ok()) return st;
  }
  if (X509_sign(cert.get(), keys_->key.get(), EVP_sha256()) <= 0) {
    return absl::InternalError(absl::StrCat("signing a certificate: ", OpenSslError()));
  }
  Bio out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert.get());
  return IssuedCertificate{BioText(out.get()), AsnTime(X509_get0_notAfter(cert.get()))};
}

absl::StatusOr<KeyAndCsr> MakeKeyAndCsr(const std::string& common_name) {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return absl::InternalError(absl::StrCat("EC key: ", OpenSslError()));
  ReqPtr req(X509_REQ_new());
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_REQ_set_pubkey(req.get(), key.get());
  if (X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0) {
    return absl::InternalError(absl::StrCat("signing a request: ", OpenSslError()));
  }
  KeyAndCsr out;
  Bio key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = BioText(key_bio.get());
  Bio req_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509_REQ(req_bio.get(), req.get());
  out.csr_pem = BioText(req_bio.get());
  return out;
}

absl::StatusOr<CertificateInfo> ReadCertificateInfo(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  CertificateInfo info;
  info.not_before = AsnTime(X509_get0_notBefore(cert.get()));
  info.not_after = AsnTime(X509_get0_notAfter(cert.get()));
  char cn[256] = "";
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof cn) >
      0) {
    info.common_name = cn;
  }
  return info;
}

}  // namespace tessera::tls
