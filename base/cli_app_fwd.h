#pragma once
// CLI11's App, declared for the headers whose functions add flags to one (AddHostFlags,
// AddTlsFlags, ...). Including <CLI/CLI.hpp> costs about 10 s of compile time in every unit
// (CLI11 2.1 builds its validators as objects in each unit), and most units that include those
// headers only use what the flags configure; so only the .cc files that add or read flags
// include CLI11 itself.
namespace CLI {
class App;
}  // namespace CLI
