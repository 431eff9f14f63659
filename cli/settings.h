#pragma once
// Where mcli's settings come from, highest first: the --endpoint/--api-key/--ca flags, the
// TESSERA_ENDPOINT/TESSERA_API_KEY/TESSERA_CA environment variables, the config file
// ($TESSERA_CONFIG or ~/.tessera/config.yaml, keys `endpoint`, `api_key` and `ca`), then the
// defaults.

#include <functional>
#include <optional>
#include <string>

namespace tessera::cli {

inline constexpr char kDefaultEndpoint[] = "127.0.0.1:50051";

// A value and where it came from ("--endpoint flag", "TESSERA_ENDPOINT", "config file", ...).
struct Setting {
  std::string value;
  std::string source;
};

struct Settings {
  Setting endpoint;
  Setting api_key;
  Setting ca;  // the cluster CA's PEM file: the server's certificate must chain to it
  std::string config_path;
  bool config_exists = false;
};

// The global flags as given; empty means not given.
struct SettingFlags {
  std::string endpoint;
  std::string api_key;
  std::string ca;
};

// Reads an environment variable; nullopt when it is unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// $TESSERA_CONFIG, else $HOME/.tessera/config.yaml (the passwd entry's home when HOME is unset).
std::string ConfigPath(const EnvLookup& env);

struct ConfigValues {
  std::optional<std::string> endpoint;
  std::optional<std::string> api_key;
  std::optional<std::string> ca;
};

// The config file's values; all empty when the file does not exist. Throws CliError (exit 2)
// naming the file when it cannot be read or is not a YAML mapping of strings.
ConfigValues ReadConfigFile(const std::string& path);

// Sets one key of the config file, keeping the others, creating the file (and its folder, 0700)
// when needed. The file is replaced atomically and always left with mode 0600, since it holds
// the API key. Throws CliError naming the file on failure.
void SetConfigValue(const std::string& path, const std::string& key, const std::string& value);

// Resolves every setting. Throws CliError (exit 2) when the config file is malformed.
Settings ResolveSettings(const SettingFlags& flags, const EnvLookup& env);

// "abcd…wxyz" for long secrets, "****" for short ones, "(not set)" for none.
std::string MaskSecret(const std::string& secret);

// Throws a usage error naming `source` when `key` cannot be an API key: a key is one word of
// visible ASCII. A pasted key with its line break or label (`Secret: tsk_...`) would otherwise
// reach gRPC, which aborts on such metadata. The message never repeats the key.
void CheckApiKey(const std::string& key, const std::string& source);

}  // namespace tessera::cli
