// Settings resolution (flag > environment > config file > default), the config file's mode and
// the masking of the API key.

#include "cli/settings.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/client.h"
#include "cli/errors.h"
#include "tests/support/temp_dir.h"

namespace settings_test {

using tessera::cli::CheckApiKey;
using tessera::cli::CliError;
using tessera::cli::ConfigPath;
using tessera::cli::Connection;
using tessera::cli::EnvLookup;
using tessera::cli::kExitUsage;
using tessera::cli::MaskSecret;
using tessera::cli::ReadConfigFile;
using tessera::cli::ResolveSettings;
using tessera::cli::SetConfigValue;
using tessera::cli::SettingFlags;

using tessera::testing::TempDir;

EnvLookup MapEnv(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

unsigned Mode(const std::string& path) {
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  return info.st_mode & 0777;
}

// Sets or unsets a process environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

TEST_CASE("settings default to the local endpoint and no key", "[cli][settings]") {
  TempDir home;
  const auto settings = ResolveSettings({}, MapEnv({{"HOME", home.path}}));
  CHECK(settings.endpoint.value == "127.0.0.1:50051");
  CHECK(settings.endpoint.source == "default");
  CHECK(settings.api_key.value.empty());
  CHECK(settings.config_path == home.path + "/.tessera/config.yaml");
  CHECK_FALSE(settings.config_exists);
}

TEST_CASE("settings resolve flag, then environment, then config file", "[cli][settings]") {
  TempDir home;
  const std::string path = home.path + "/.tessera/config.yaml";
  WriteFile(path, "endpoint: file-host:1\napi_key: file-key\n");

  std::map<std::string, std::string> env = {{"HOME", home.path}};
  auto settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.config_exists);
  CHECK(settings.endpoint.value == "file-host:1");
  CHECK(settings.endpoint.source == "config file " + path);
  CHECK(settings.api_key.value == "file-key");

  env["TESSERA_ENDPOINT"] = "env-host:2";
  env["TESSERA_API_KEY"] = "env-key";
  settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.endpoint.value == "env-host:2");
  CHECK(settings.endpoint.source == "TESSERA_ENDPOINT");
  CHECK(settings.api_key.value == "env-key");
  CHECK(settings.api_key.source == "TESSERA_API_KEY");

  settings = ResolveSettings(SettingFlags{"flag-host:3", "flag-key", ""}, MapEnv(env));
  CHECK(settings.endpoint.value == "flag-host:3");
  CHECK(settings.endpoint.source == "--endpoint flag");
  CHECK(settings.api_key.value == "flag-key");
  CHECK(settings.api_key.source == "--api-key flag");

  // Each setting resolves on its own.
  env.erase("TESSERA_API_KEY");
  settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.endpoint.value == "env-host:2");
  CHECK(settings.api_key.value == "file-key");
}

TEST_CASE("settings: the CA comes from --ca, TESSERA_CA or the config file's ca") {
  TempDir home;
  const std::string path = home.path + "/.tessera/config.yaml";
  WriteFile(path, "endpoint: h:1\nca: /etc/tessera/file-ca.pem\n");
  std::map<std::string, std::string> env = {{"HOME", home.path}};
  auto settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.ca.value == "/etc/tessera/file-ca.pem");
  CHECK(settings.ca.source == "config file " + path);
  env["TESSERA_CA"] = "/env-ca.pem";
  settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.ca.value == "/env-ca.pem");
  CHECK(settings.ca.source == "TESSERA_CA");
  settings = ResolveSettings(SettingFlags{"", "", "/flag-ca.pem"}, MapEnv(env));
  CHECK(settings.ca.value == "/flag-ca.pem");
  CHECK(settings.ca.source == "--ca flag");
  env.erase("TESSERA_CA");
  WriteFile(path, "endpoint: h:1\n");
  settings = ResolveSettings({}, MapEnv(env));
  CHECK(settings.ca.value.empty());
  CHECK(settings.ca.source == "not set");
}

TEST_CASE("connection: an API key is sent in plain text only to loopback") {
  // Plain text to this machine: allowed, bare or with http://.
  CHECK_NOTHROW(Connection("127.0.0.1:50051", "k"));
  CHECK_NOTHROW(Connection("http://localhost:50051", "k"));
  CHECK_NOTHROW(Connection("127.0.0.1:1,[::1]:2", "k"));
  // Across a network: refused with a message saying how to set the CA.
  for (const char* endpoint :
       {"10.1.2.3:50051", "http://tessera.example.com:443", "127.0.0.1:1,10.0.0.1:2"}) {
    INFO(endpoint);
    try {
      Connection(endpoint, "k");
      FAIL("no error for plain text to " << endpoint);
    } catch (const CliError& e) {
      CHECK(e.exit_code() == kExitUsage);
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("--ca FILE"));
    }
  }
  // With a CA (or https://) it is TLS, wherever the server is; http:// stays plain text.
  CHECK_NOTHROW(Connection("10.1.2.3:50051", "k", "/etc/tessera/ca.pem"));
  CHECK_NOTHROW(Connection("https://tessera.example.com:443", "k"));
  CHECK_THROWS_AS(Connection("http://10.1.2.3:50051", "k", "/etc/tessera/ca.pem"), CliError);
}

TEST_CASE("settings read the process environment", "[cli][settings]") {
  TempDir dir;
  const std::string path = dir.path + "/custom.yaml";
  WriteFile(path, "endpoint: file-host:1\n");
  ScopedEnv config("TESSERA_CONFIG", path.c_str());
  {
    ScopedEnv endpoint("TESSERA_ENDPOINT", nullptr);
    ScopedEnv key("TESSERA_API_KEY", "process-key");
    const auto settings = ResolveSettings({}, tessera::cli::ProcessEnv());
    CHECK(settings.config_path == path);
    CHECK(settings.endpoint.value == "file-host:1");
    CHECK(settings.api_key.value == "process-key");
  }
  {
    ScopedEnv endpoint("TESSERA_ENDPOINT", "process-host:9");
    ScopedEnv key("TESSERA_API_KEY", "");  // empty counts as unset
    const auto settings = ResolveSettings({}, tessera::cli::ProcessEnv());
    CHECK(settings.endpoint.value == "process-host:9");
    CHECK(settings.api_key.value.empty());
  }
}

TEST_CASE("TESSERA_CONFIG names the config file", "[cli][settings]") {
  TempDir dir;
  const std::string path = dir.path + "/elsewhere.yaml";
  CHECK(ConfigPath(MapEnv({{"TESSERA_CONFIG", path}, {"HOME", "/nonexistent"}})) == path);
  CHECK(ConfigPath(MapEnv({{"HOME", "/home/u"}})) == "/home/u/.tessera/config.yaml");
}

TEST_CASE("a malformed config file is an error naming it", "[cli][settings]") {
  TempDir dir;
  const std::string path = dir.path + "/config.yaml";
  const auto env = MapEnv({{"TESSERA_CONFIG", path}});

  WriteFile(path, "endpoint: [unclosed\n");
  try {
    ResolveSettings({}, env);
    FAIL("expected an error");
  } catch (const CliError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Catch::Contains(path));
    CHECK_THAT(e.what(), Catch::Contains("line"));
  }

  WriteFile(path, "- a list\n");
  CHECK_THROWS_AS(ResolveSettings({}, env), CliError);

  WriteFile(path, "api_key: {nested: map}\n");
  CHECK_THROWS_WITH(ResolveSettings({}, env), Catch::Contains("api_key must be a string"));

  // Flags and environment that cover every setting do not need the file.
  const auto settings =
      ResolveSettings(SettingFlags{"h:1", "", "/etc/tessera/ca.pem"},
                      MapEnv({{"TESSERA_CONFIG", path}, {"TESSERA_API_KEY", "k"}}));
  CHECK(settings.endpoint.value == "h:1");
}

TEST_CASE("an empty config file holds nothing", "[cli][settings]") {
  TempDir dir;
  const std::string path = dir.path + "/config.yaml";
  WriteFile(path, "");
  const auto values = ReadConfigFile(path);
  CHECK_FALSE(values.endpoint);
  CHECK_FALSE(values.api_key);
}

TEST_CASE("the config file is written with mode 0600 and keeps other keys", "[cli][settings]") {
  TempDir home;
  const std::string path = home.path + "/.tessera/config.yaml";
  SetConfigValue(path, "endpoint", "host:7");
  CHECK(Mode(path) == 0600);
  CHECK(Mode(home.path + "/.tessera") == 0700);

  SetConfigValue(path, "api_key", "secret-key");
  CHECK(Mode(path) == 0600);
  const auto values = ReadConfigFile(path);
  CHECK(values.endpoint == "host:7");
  CHECK(values.api_key == "secret-key");

  // A file someone made readable is tightened when the key is written.
  chmod(path.c_str(), 0644);
  SetConfigValue(path, "api_key", "other-key");
  CHECK(Mode(path) == 0600);
  CHECK(ReadConfigFile(path).api_key == "other-key");
  CHECK_THAT(ReadFile(path), Catch::Contains("endpoint: host:7"));
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(home.path + "/.tessera")) {
    (void)entry;
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("API keys are masked", "[cli][settings]") {
  CHECK(MaskSecret("") == "(not set)");
  CHECK(MaskSecret("short") == "****");
  CHECK(MaskSecret("tsk_0123456789abcdef") == "tsk_****cdef");
}

TEST_CASE("an API key that is not one word of visible ASCII is refused, naming its source") {
  CHECK_NOTHROW(CheckApiKey("tsk_0123456789abcdef", "TESSERA_API_KEY"));
  CHECK_NOTHROW(CheckApiKey("", "not set"));  // no key: the server says so
  const auto message = [](const std::string& key) {
    try {
      CheckApiKey(key, "TESSERA_API_KEY");
    } catch (const tessera::cli::CliError& e) {
      CHECK(e.exit_code() == tessera::cli::kExitUsage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string pasted = "tsk_0123456789abcdef\n";
  CHECK(message(pasted).find("TESSERA_API_KEY holds a line break") != std::string::npos);
  CHECK(message("Secret:  tsk_0123456789abcdef").find("holds a space") != std::string::npos);
  CHECK(message(std::string("tsk_\x01x")).find("a character no key has") != std::string::npos);
  CHECK(message("tsk_\xc3\xa9").find("a character no key has") != std::string::npos);
  CHECK(message(pasted).find("0123456789abcdef") == std::string::npos);  // never repeated
  CHECK(message("Secret:  tsk_0123456789abcdef").find("0123456789abcdef") == std::string::npos);
}

}  // namespace settings_test
