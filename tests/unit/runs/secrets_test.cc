// Users' secrets: sealed at rest, each user's own, never shown, only to the scheduler.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "services/runs/run_secrets.h"
#include "services/runs/secret_manager.h"
#include "services/store/memory/memory_database.h"
#include "tests/support/temp_dir.h"

namespace tessera::runs {
namespace secrets_test {

using tessera::testing::TempDir;

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

  // A run of Alice's that names the secret: the scheduler gets it, in clear; a person cannot ask.
  v1::Run run;
  run.set_id("run-1");
  run.set_name("train");
  run.set_user("alice");
  run.mutable_spec()->add_secrets("hf");
  run.set_status(v1::RUN_STATUS_COMPLETED);
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

v1::Secret Typed(const std::string& name, v1::SecretType type) {
  v1::Secret s;
  s.set_name(name);
  s.set_type(type);
  if (type == v1::SECRET_TYPE_ENVIRONMENT) s.set_env_key("KEY_" + std::to_string(name.size()));
  if (type != v1::SECRET_TYPE_ENVIRONMENT && type != v1::SECRET_TYPE_DOCKER_REGISTRY) {
    s.set_mount_path("/secrets/" + name);
  }
  if (type == v1::SECRET_TYPE_DOCKER_REGISTRY) {
    s.set_server(name == "ghcr" ? "ghcr.io" : "registry.example:5000");
    s.set_username("me");
  }
  return s;
}

// Stores a run of Alice's (named and identified by `id`) and asks for its secrets as the
// scheduler does.
absl::Status AskForRunSecrets(Fixture& f, const std::string& id, const v1::RunSpec& spec,
                              v1::RunStatus status, v1::GetRunSecretsResponse* resp) {
  v1::Run run;
  run.set_id(id);
  run.set_name(id);
  run.set_user("alice");
  run.set_status(status);
  *run.mutable_spec() = spec;
  REQUIRE(f.stores.runs->CreateRun(run, {}, std::nullopt).ok());
  v1::GetRunSecretsRequest req;
  req.set_run_id(id);
  return f.manager.GetRunSecrets(f.system, req, resp);
}

std::set<std::string> SecretsOfRun(Fixture& f, const std::string& id, const v1::RunSpec& spec,
                                   v1::RunStatus status = v1::RUN_STATUS_QUEUED) {
  v1::GetRunSecretsResponse resp;
  const absl::Status st = AskForRunSecrets(f, id, spec, status, &resp);
  INFO(st.ToString());
  REQUIRE(st.ok());
  std::set<std::string> names;
  for (const auto& sv : resp.secrets()) names.insert(sv.secret().name());
  return names;
}

TEST_CASE("a run's nodes get only the secrets it names or its spec needs") {
  Fixture f;
  REQUIRE(f.Create(f.alice, Typed("hf", v1::SECRET_TYPE_ENVIRONMENT), "t").ok());
  REQUIRE(f.Create(f.alice, Typed("wandb", v1::SECRET_TYPE_ENVIRONMENT), "t").ok());
  REQUIRE(f.Create(f.alice, Typed("gcp", v1::SECRET_TYPE_MOUNTED), "t").ok());
  REQUIRE(f.Create(f.alice, Typed("ghcr", v1::SECRET_TYPE_DOCKER_REGISTRY), "t").ok());
  REQUIRE(f.Create(f.alice, Typed("internal", v1::SECRET_TYPE_DOCKER_REGISTRY), "t").ok());
  REQUIRE(f.Create(f.alice, Typed("git", v1::SECRET_TYPE_GIT_SSH), "t").ok());

  v1::RunSpec plain;
  plain.set_image("pytorch/pytorch:2.3");
  CHECK(SecretsOfRun(f, "plain", plain).empty());

  v1::RunSpec named = plain;
  named.add_secrets("hf");
  named.add_secrets("gcp");
  CHECK(SecretsOfRun(f, "named", named) == std::set<std::string>{"hf", "gcp"});

  v1::RunSpec all = plain;
  all.set_all_secrets(true);
  CHECK(SecretsOfRun(f, "all", all).size() == 6);

  // The registry its image names: that registry's credentials, no other's.
  v1::RunSpec private_image;
  private_image.set_image("ghcr.io/alice/trainer:1");
  CHECK(SecretsOfRun(f, "ghcr", private_image) == std::set<std::string>{"ghcr"});
  private_image.set_image("registry.example:5000/team/trainer@sha256:" + std::string(64, 'a'));
  CHECK(SecretsOfRun(f, "internal", private_image) == std::set<std::string>{"internal"});

  // A git_repo cloned over SSH: the git-ssh key; cloned over HTTPS: nothing.
  v1::RunSpec git = plain;
  v1::Integration* repo = git.add_integrations();
  repo->set_integration_type("git_repo");
  (*repo->mutable_fields()->mutable_fields())["git_repo"].set_string_value("alice/code");
  CHECK(SecretsOfRun(f, "https-clone", git).empty());
  (*repo->mutable_fields()->mutable_fields())["ssh_clone"].set_bool_value(true);
  CHECK(SecretsOfRun(f, "ssh-clone", git) == std::set<std::string>{"git"});

  // A name the owner no longer has: the run does not start without it.
  v1::RunSpec gone = plain;
  gone.add_secrets("nope");
  v1::GetRunSecretsResponse resp;
  const absl::Status st = AskForRunSecrets(f, "gone", gone, v1::RUN_STATUS_QUEUED, &resp);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(absl::StrContains(st.message(), "'nope'"));
  CHECK(resp.secrets_size() == 0);
}

TEST_CASE("a secret a waiting or running run names cannot be deleted under it") {
  Fixture f;
  REQUIRE(f.Create(f.alice, Typed("hf", v1::SECRET_TYPE_ENVIRONMENT), "t").ok());
  REQUIRE(f.Create(f.bob, Typed("hf", v1::SECRET_TYPE_ENVIRONMENT), "t").ok());
  v1::RunSpec spec;
  spec.add_secrets("hf");
  SecretsOfRun(f, "train", spec, v1::RUN_STATUS_RUNNING);
  v1::DeleteSecretRequest del;
  del.set_name("hf");
  v1::DeleteSecretResponse deleted;
  const absl::Status refused = f.manager.DeleteSecret(f.alice, del, &deleted);
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK(absl::StrContains(refused.message(), "run train"));
  // Bob's secret of the same name is his: Alice's run does not hold it.
  CHECK(f.manager.DeleteSecret(f.bob, del, &deleted).ok());
  // Once the run has ended, it goes.
  auto run = f.stores.runs->GetRun("train");
  REQUIRE(run.ok());
  run->set_status(v1::RUN_STATUS_STOPPED);
  REQUIRE(f.stores.runs->UpdateRun(*run, run->version(), {}).ok());
  CHECK(f.manager.DeleteSecret(f.alice, del, &deleted).ok());
}

TEST_CASE("the registry an image names, by Docker's rule") {
  CHECK(RegistryNamedBy("ghcr.io/a/b:1") == "ghcr.io");
  CHECK(RegistryNamedBy("127.0.0.1:5000/x") == "127.0.0.1:5000");
  CHECK(RegistryNamedBy("localhost/x") == "localhost");
  CHECK(RegistryNamedBy("pytorch/pytorch:2.3").empty());
  CHECK(RegistryNamedBy("ubuntu").empty());
  CHECK(RegistryNamedBy("host").empty());
  CHECK(RegistryNamedBy("").empty());
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

}  // namespace secrets_test
}  // namespace tessera::runs
