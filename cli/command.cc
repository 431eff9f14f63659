#include "cli/command.h"

namespace tessera::cli {

CommandContext::CommandContext(Settings settings, OutputFormat format, std::ostream& out,
                               std::ostream& err, int terminal_width)
    : settings_(std::move(settings)),
      format_(format),
      out_(out),
      err_(err),
      terminal_width_(terminal_width) {}

Connection& CommandContext::connection() {
  if (!connection_) {
    CheckApiKey(settings_.api_key.value, settings_.api_key.source);
    connection_ = std::make_unique<Connection>(settings_.endpoint.value, settings_.api_key.value,
                                               settings_.ca.value);
  }
  return *connection_;
}

void OnParsed(CLI::App* command, ActionSlot& slot, Action action) {
  command->callback([&slot, action = std::move(action)] { slot.action = action; });
}

bool PrintIfStructured(CommandContext& context, const Json& document) {
  if (context.format() == OutputFormat::kTable) return false;
  PrintDocument(context.out(), context.format(), document);
  return true;
}

}  // namespace tessera::cli
