#pragma once
// Where mcli reads a secret (a secret's value, a registry password, an API key) so that it never
// has to be on the command line, which other users of the machine see in ps and which shells keep
// in their history: standard input ("-", or a prompt without echo on a terminal), a file, or an
// environment variable.

#include <string>

namespace tessera::cli {

// The value from `source`: "-" for standard input, else a file's path. One trailing newline
// (\n or \r\n) is dropped, as `echo` and editors add it. A usage error (exit 2) naming `what`
// when it cannot be read or is empty.
std::string ReadSecretFrom(const std::string& source, const std::string& what);

// The value of the environment variable `name`; a usage error naming it and `what` when it is
// unset or empty.
std::string SecretFromEnvironment(const std::string& name, const std::string& what);

}  // namespace tessera::cli
