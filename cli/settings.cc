#include "cli/settings.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli/errors.h"

namespace tessera::cli {
namespace {

constexpr char kEndpointKey[] = "endpoint";
constexpr char kApiKeyKey[] = "api_key";
constexpr char kCaKey[] = "ca";

std::string HomeDirectory(const EnvLookup& env) {
  if (auto home = env("HOME")) return *home;
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* result = nullptr;
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &result) == 0 && result &&
      result->pw_dir) {
    return result->pw_dir;
  }
  ThrowUsage("cannot find the home folder: set HOME or TESSERA_CONFIG");
}

// Loads the file as a YAML mapping; an empty node when it does not exist.
YAML::Node LoadConfigNode(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return YAML::Node(YAML::NodeType::Map);
  std::ifstream in(path);
  if (!in) {
    ThrowUsage("cannot read config file " + path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    ThrowUsage("config file " + path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    ThrowUsage("config file " + path + " must be a YAML mapping (endpoint: ..., api_key: ...)");
  }
  return root;
}

std::optional<std::string> StringValue(const YAML::Node& root, const char* key,
                                       const std::string& path) {
  const YAML::Node value = root[key];
  if (!value || value.IsNull()) return std::nullopt;
  if (!value.IsScalar()) {
    ThrowUsage("config file " + path + ": line " + std::to_string(value.Mark().line + 1) + ": " +
               key + " must be a string");
  }
  std::string text = value.Scalar();
  if (text.empty()) return std::nullopt;
  return text;
}

void WriteAll(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowUsage("cannot write config file " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

std::string ConfigPath(const EnvLookup& env) {
  if (auto path = env("TESSERA_CONFIG")) return *path;
  return (std::filesystem::path(HomeDirectory(env)) / ".tessera" / "config.yaml").string();
}

ConfigValues ReadConfigFile(const std::string& path) {
  const YAML::Node root = LoadConfigNode(path);
  return ConfigValues{StringValue(root, kEndpointKey, path), StringValue(root, kApiKeyKey, path),
                      StringValue(root, kCaKey, path)};
}

void SetConfigValue(const std::string& path, const std::string& key, const std::string& value) {
  YAML::Node root = LoadConfigNode(path);
  root[key] = value;
  YAML::Emitter emitter;
  emitter << root;
  const std::string text = std::string(emitter.c_str()) + "\n";

  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.parent_path();
  if (!folder.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(folder, ec)) {
      std::filesystem::create_directories(folder, ec);
      if (ec) ThrowUsage("cannot create " + folder.string() + ": " + ec.message());
      ::chmod(folder.c_str(), 0700);
    }
  }
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) ThrowUsage("cannot write config file " + path + ": " + std::strerror(errno));
  try {
    ::fchmod(fd, 0600);  // O_CREAT's mode is filtered by the umask; make it exact.
    WriteAll(fd, text, path);
    if (::fsync(fd) != 0) {
      ThrowUsage("cannot write config file " + path + ": " + std::strerror(errno));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    ThrowUsage("cannot write config file " + path + ": " + std::strerror(error));
  }
}

Settings ResolveSettings(const SettingFlags& flags, const EnvLookup& env) {
  Settings settings;
  settings.config_path = ConfigPath(env);
  std::error_code ec;
  settings.config_exists = std::filesystem::exists(settings.config_path, ec);
  const std::optional<std::string> env_endpoint = env("TESSERA_ENDPOINT");
  const std::optional<std::string> env_api_key = env("TESSERA_API_KEY");
  const std::optional<std::string> env_ca = env("TESSERA_CA");
  // The file is read only when something is left to take from it, so that a broken file does
  // not stand in the way of flags or environment variables that override it.
  ConfigValues file;
  if ((flags.endpoint.empty() && !env_endpoint) || (flags.api_key.empty() && !env_api_key) ||
      (flags.ca.empty() && !env_ca)) {
    file = ReadConfigFile(settings.config_path);
  }
  const std::string file_source = "config file " + settings.config_path;

  if (!flags.endpoint.empty()) {
    settings.endpoint = {flags.endpoint, "--endpoint flag"};
  } else if (env_endpoint) {
    settings.endpoint = {*env_endpoint, "TESSERA_ENDPOINT"};
  } else if (file.endpoint) {
    settings.endpoint = {*file.endpoint, file_source};
  } else {
    settings.endpoint = {kDefaultEndpoint, "default"};
  }

  if (!flags.api_key.empty()) {
    settings.api_key = {flags.api_key, "--api-key flag"};
  } else if (env_api_key) {
    settings.api_key = {*env_api_key, "TESSERA_API_KEY"};
  } else if (file.api_key) {
    settings.api_key = {*file.api_key, file_source};
  } else {
    settings.api_key = {"", "not set"};
  }

  if (!flags.ca.empty()) {
    settings.ca = {flags.ca, "--ca flag"};
  } else if (env_ca) {
    settings.ca = {*env_ca, "TESSERA_CA"};
  } else if (file.ca) {
    settings.ca = {*file.ca, file_source};
  } else {
    settings.ca = {"", "not set"};
  }
  return settings;
}

void CheckApiKey(const std::string& key, const std::string& source) {
  for (const char c : key) {
    if (c >= 0x21 && c <= 0x7e) continue;
    ThrowUsage("the API key from " + source + " holds " +
               (c == ' '                 ? std::string("a space")
                : c == '\n' || c == '\r' ? std::string("a line break")
                                         : std::string("a character no key has")) +
               ": a key is one word (tsk_ and 64 hex digits), without a label or a line break");
  }
}

std::string MaskSecret(const std::string& secret) {
  if (secret.empty()) return "(not set)";
  if (secret.size() < 12) return "****";
  return secret.substr(0, 4) + "****" + secret.substr(secret.size() - 4);
}

}  // namespace tessera::cli
