#include "cli/secret_input.h"

#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <iterator>

#include "base/file_util.h"
#include "cli/errors.h"

namespace tessera::cli {
namespace {

std::string DropTrailingNewline(std::string value) {
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  return value;
}

// One line typed at the terminal, not echoed.
std::string PromptWithoutEcho(const std::string& what) {
  std::cerr << what << ": " << std::flush;
  termios saved{};
  const bool terminal = ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (terminal) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  std::getline(std::cin, line);
  if (terminal) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
  std::cerr << "\n";
  return line;
}

}  // namespace

std::string ReadSecretFrom(const std::string& source, const std::string& what) {
  std::string value;
  if (source == "-") {
    if (::isatty(STDIN_FILENO)) {
      value = PromptWithoutEcho(what);
    } else {
      value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
  } else {
    auto read = ReadWholeFile(source);
    if (!read.ok())
      ThrowUsage("cannot read the " + what + ": " + std::string(read.status().message()));
    value = *std::move(read);
  }
  value = DropTrailingNewline(std::move(value));
  if (value.empty()) {
    ThrowUsage("the " + what + " read from " + (source == "-" ? "standard input" : source) +
               " is empty");
  }
  return value;
}

std::string SecretFromEnvironment(const std::string& name, const std::string& what) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') {
    ThrowUsage("the " + what + " comes from the environment variable " + name +
               ", which is not set (or give NAME=VALUE, or NAME=- to read it from standard input)");
  }
  return value;
}

}  // namespace tessera::cli
