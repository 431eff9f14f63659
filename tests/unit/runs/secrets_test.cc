// Users' secrets: sealed at rest, each user's own, never shown, only to the scheduler.
#include <catch2/catch.hpp>
#include <fstream>

#include "absl/strings/match.h"
#include "services/runs/secret_manager.h"
#include "services/store/memory/memory_database.h"
#include "tests/support/temp_dir.h"

namespace tessera::runs {
namespace {

using testing::TempDir;

SecretBox TestBox(unsigned char fill = 7) {
  std::array<unsigned char, SecretBox::kKeyBytes> key;
  key.fill(fill);
  return SecretBox(key);
}

TEST_CASE("a sealed secret opens only with its key and its owner and name") {
  const SecretBox box = TestBox();
  auto sealed = box.Seal("hunter2", "alice\nhf");
  REQUIRE(sealed.ok());
  CHECK_FALSE(absl::StrContains(*sealed, "hunter2"));
  CHECK(*box.Open(*sealed, "alice\nhf") == "hunter2");
  // Two seals of one value differ (a fresh nonce each).
  CHECK(*box.Seal("hunter2", "alice\nhf") != *sealed);
  CHECK(box.Open(*sealed, "bob\nhf").status().code() == absl::StatusCode::kDataLoss);
  CHECK(TestBox(8).Open(*sealed, "alice\nhf").status().code() == absl::StatusCode::kDataLoss);
  std::string tampered = *sealed;
  tampered[20] ^= 1;
  CHECK(box.Open(tampered, "alice\nhf").status().code() == absl::StatusCode::kDataLoss);
  CHECK(box.Open("x", "alice\nhf").status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("the key file must be private and hold 32 bytes") {
  TempDir dir;
  const std::string path = dir.path + "/key";
  std::ofstream(path) << std::string(64, 'a') << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  auto loose = SecretBox::FromKeyFile(path);
  CHECK(absl::StrContains(loose.status().message(), "may be read by others"));
  std::filesystem::permissions(path, std::filesystem::perms::owner_read);
  CHECK(SecretBox::FromKeyFile(path).ok());
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  std::ofstream(path) << "too short\n";
  CHECK(absl::StrContains(SecretBox::FromKeyFile(path).status().message(), "64 hex digits"));
  CHECK(absl::StrContains(SecretBox::FromKeyFile(dir.path + "/none").status().message(),
                          "--secrets-key-file: cannot read"));
}

v1::Secret EnvSecret(const std::string& name, const std::string& key) {
  v1::Secret s;
  s.set_name(name);
  s.set_type(v1::SECRET_TYPE_ENVIRONMENT);
  s.set_env_key(key);
  return s;
}

TEST_CASE("a secret is refused, naming the field, when it is malformed") {
  CHECK(ValidateSecret(EnvSecret("hf", "HF_TOKEN"), 5).ok());
  CHECK(ValidateSecret(EnvSecret("Bad_Name", "X"), 5).message().find("secret.name") == 0);
  CHECK(ValidateSecret(EnvSecret("hf", "1X"), 5).message().find("secret.env_key") == 0);
  CHECK(ValidateSecret(EnvSecret("hf", "X"), 0).message() == "value: required");
  CHECK(
      ValidateSecret(EnvSecret("hf", "X"), kMaxSecretBytes + 1).message().find("value: at most") ==
      0);
  v1::Secret file;
  file.set_name("cfg");
  file.set_type(v1::SECRET_TYPE_MOUNTED);
  CHECK(ValidateSecret(file, 5).message() == "secret.mount_path: required");
  file.set_mount_path("relative");
  CHECK(ValidateSecret(file, 5).message().find("is not an absolute path") != std::string::npos);
  file.set_mount_path("/proc/self/x");
  CHECK(ValidateSecret(file, 5).message() == "secret.mount_path: /proc belongs to the sandbox");
  file.set_mount_path("/secrets/cfg.json");
  CHECK(ValidateSecret(file, 5).ok());
  v1::Secret registry;
  registry.set_name("docker");
  registry.set_type(v1::SECRET_TYPE_DOCKER_REGISTRY);
  registry.set_server("ghcr.io");
  CHECK(ValidateSecret(registry, 5).message() == "secret.username: required");
  v1::Secret untyped;
  untyped.set_name("x");
  CHECK(ValidateSecret(untyped, 5).message().find("secret.type") == 0);
}

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  SecretManager manager{stores.secrets, stores.runs, TestBox(), clock};
  auth::Principal alice{"alice", v1::ROLE_USER};
  auth::Principal bob{"bob", v1::ROLE_USER};
  auth::Principal system{"tessera", v1::ROLE_SYSTEM};

  absl::Status Create(const auth::Principal& who, const v1::Secret& s, const std::string& value) {
    v1::CreateSecretRequest req;
    *req.mutable_secret() = s;
    req.set_value(value);
    v1::CreateSecretResponse resp;
    return manager.CreateSecret(who, req, &resp);
  }
};

TEST_CASE("each user sees only their own secrets, never a value, the scheduler gets them") {
  Fixture f;
  REQUIRE(f.Create(f.alice, EnvSecret("hf", "HF_TOKEN"), "alice-token").ok());
  REQUIRE(f.Create(f.bob, EnvSecret("hf", "HF_TOKEN"), "bob-token").ok());
  CHECK(f.Create(f.alice, EnvSecret("hf", "OTHER"), "x").code() ==
        absl::StatusCode::kAlreadyExists);
  // Stored sealed: no value in the database's rows.
  const auto stored = f.stores.secrets->ListSecrets("alice");
  REQUIRE(stored.ok());
  for (const auto& r : *stored) {
    CHECK_FALSE(absl::StrContains(r.sealed, "alice-token"));
  }
  v1::ListSecretsResponse list;
  REQUIRE(f.manager.ListSecrets(f.alice, {}, &list).ok());
  REQUIRE(list.secrets_size() == 1);
  CHECK(list.secrets(0).user() == "alice");
  CHECK_FALSE(absl::StrContains(list.DebugString(), "alice-token"));

  // A run of Alice's: the scheduler gets her secrets, in clear; a person cannot ask.
  v1::Run run;
  run.set_id("run-1");
  run.set_name("train");
  run.set_user("alice");
  REQUIRE(f.stores.runs->CreateRun(run, {}, std::nullopt).ok());
  v1::GetRunSecretsRequest req;
  req.set_run_id("run-1");
  v1::GetRunSecretsResponse resp;
  CHECK(absl::IsPermissionDenied(f.manager.GetRunSecrets(f.alice, req, &resp)));
  REQUIRE(f.manager.GetRunSecrets(f.system, req, &resp).ok());
  REQUIRE(resp.secrets_size() == 1);
  CHECK(resp.secrets(0).value() == "alice-token");

  v1::DeleteSecretRequest del;
  del.set_name("hf");
  v1::DeleteSecretResponse deleted;
  REQUIRE(f.manager.DeleteSecret(f.alice, del, &deleted).ok());
  CHECK(absl::IsNotFound(f.manager.DeleteSecret(f.alice, del, &deleted)));
  // Bob's of the same name stays.
  v1::ListSecretsResponse bobs;
  REQUIRE(f.manager.ListSecrets(f.bob, {}, &bobs).ok());
  CHECK(bobs.secrets_size() == 1);
}

TEST_CASE("a cluster without a key keeps no secrets, and says how to give one") {
  store::Stores stores = store::MakeMemoryStores();
  SecretManager keyless{stores.secrets, stores.runs, std::nullopt, std::make_shared<FakeClock>()};
  v1::CreateSecretRequest req;
  *req.mutable_secret() = EnvSecret("hf", "HF_TOKEN");
  req.set_value("x");
  v1::CreateSecretResponse resp;
  const auto st = keyless.CreateSecret({"alice", v1::ROLE_USER}, req, &resp);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(absl::StrContains(st.message(), "--secrets-key-file"));
}

}  // namespace
}  // namespace tessera::runs
