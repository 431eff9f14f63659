// mcli create webhook URL, mcli get webhooks, mcli delete webhook ID, mcli get notifications:
// webhooks that tell you (or your team, or the operators) what happened to runs and nodes, and
// the record of what was delivered.

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/secret_input.h"
#include "cli/table.h"
#include "cli/time_format.h"
#include "tessera/v1/notifications.grpc.pb.h"

namespace tessera::cli {
namespace {

namespace v1 = tessera::v1;

struct CreateWebhookOptions {
  std::string url;
  std::string format = "slack";
  std::vector<std::string> events;
  std::string team;
  bool nodes = false;
  std::string queue_bound;
  std::string secret_file;  // a file, or "-"
  std::string secret_env;   // a variable's name
};

// "failed" -> NOTIFICATION_EVENT_RUN_FAILED; "cordoned" -> NOTIFICATION_EVENT_NODE_CORDONED.
v1::NotificationEvent ParseEvent(const std::string& text) {
  const std::string upper = absl::AsciiStrToUpper(absl::StrReplaceAll(text, {{"-", "_"}}));
  for (const std::string& name :
       {"NOTIFICATION_EVENT_RUN_" + upper, "NOTIFICATION_EVENT_NODE_" + upper,
        "NOTIFICATION_EVENT_" + upper}) {
    v1::NotificationEvent e;
    if (v1::NotificationEvent_Parse(name, &e) && e != v1::NOTIFICATION_EVENT_UNSPECIFIED) return e;
  }
  if (upper == "QUEUED") return v1::NOTIFICATION_EVENT_RUN_QUEUED_TOO_LONG;
  ThrowUsage("--events: unknown event " + text +
             " (failed, completed, stopped, resumed, queued, rolled-back; cordoned, returned with "
             "--nodes)");
}

// `text` without `prefix`, if it starts with it.
std::string Without(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

std::string EventText(int event) {
  const std::string name = Without(
      v1::NotificationEvent_Name(static_cast<v1::NotificationEvent>(event)), "NOTIFICATION_EVENT_");
  return absl::AsciiStrToLower(Without(Without(name, "RUN_"), "NODE_"));
}

std::string ScopeText(const v1::Subscription& s) {
  switch (s.scope()) {
    case v1::SUBSCRIPTION_SCOPE_TEAM:
      return "team " + s.team();
    case v1::SUBSCRIPTION_SCOPE_OPERATORS:
      return "nodes";
    default:
      return "my runs";
  }
}

int CreateWebhook(CommandContext& context, const CreateWebhookOptions& o) {
  v1::CreateSubscriptionRequest request;
  v1::Subscription* s = request.mutable_subscription();
  s->set_url(o.url);
  const std::string format = absl::AsciiStrToLower(o.format);
  if (format == "slack") {
    s->set_format(v1::WEBHOOK_FORMAT_SLACK);
  } else if (format == "generic") {
    s->set_format(v1::WEBHOOK_FORMAT_GENERIC);
  } else {
    ThrowUsage("--format: slack or generic, not " + o.format);
  }
  if (o.nodes && !o.team.empty()) ThrowUsage("--nodes and --team: give one of them");
  s->set_scope(o.nodes          ? v1::SUBSCRIPTION_SCOPE_OPERATORS
               : o.team.empty() ? v1::SUBSCRIPTION_SCOPE_USER
                                : v1::SUBSCRIPTION_SCOPE_TEAM);
  s->set_team(o.team);
  std::vector<std::string> events = o.events;
  if (events.empty()) {
    events = o.nodes ? std::vector<std::string>{"cordoned", "returned"}
                     : std::vector<std::string>{"failed", "completed", "resumed"};
  }
  for (const auto& list : events) {
    for (auto part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      s->add_events(ParseEvent(std::string(part)));
    }
  }
  if (!o.queue_bound.empty()) {
    absl::Duration bound;
    if (!absl::ParseDuration(o.queue_bound, &bound) || bound <= absl::ZeroDuration()) {
      ThrowUsage("--queue-bound: a duration such as 30m or 2h, not " + o.queue_bound);
    }
    s->set_queue_bound_seconds(absl::ToDoubleSeconds(bound));
  }
  if (!o.secret_file.empty() && !o.secret_env.empty()) {
    ThrowUsage("--secret-file and --secret-env: give one of them");
  }
  if (!o.secret_file.empty()) request.set_secret(ReadSecretFrom(o.secret_file, "signing secret"));
  if (!o.secret_env.empty()) {
    request.set_secret(SecretFromEnvironment(o.secret_env, "signing secret"));
  }
  Connection& connection = context.connection();
  auto stub = v1::NotificationService::NewStub(connection.channel());
  v1::CreateSubscriptionResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->CreateSubscription(c, request, &response); });
  if (!PrintIfStructured(context, MessageToJson(response.subscription()))) {
    context.out() << "Webhook " << response.subscription().id() << " created\n";
  }
  return kExitOk;
}

int GetWebhooks(CommandContext& context) {
  Connection& connection = context.connection();
  auto stub = v1::NotificationService::NewStub(connection.channel());
  v1::ListSubscriptionsResponse response;
  connection.Unary([&](grpc::ClientContext* c) {
    return stub->ListSubscriptions(c, v1::ListSubscriptionsRequest(), &response);
  });
  if (PrintIfStructured(context, MessagesToJson(response.subscriptions()))) return kExitOk;
  Table table({"ID", "FOR", "EVENTS", "FORMAT", "URL", "OWNER", "CREATED"});
  for (const auto& s : response.subscriptions()) {
    std::vector<std::string> events;
    for (const int e : s.events()) events.push_back(EventText(e));
    std::string format = s.format() == v1::WEBHOOK_FORMAT_SLACK ? "slack" : "generic";
    if (s.signed_deliveries()) format += " (signed)";
    table.AddRow({s.id(), ScopeText(s), absl::StrJoin(events, ","), format, s.url(), s.owner(),
                  FormatTimestamp(s.created_at())});
  }
  table.Print(context.out());
  return kExitOk;
}

int DeleteWebhooks(CommandContext& context, const std::vector<std::string>& ids) {
  Connection& connection = context.connection();
  auto stub = v1::NotificationService::NewStub(connection.channel());
  for (const auto& id : ids) {
    v1::DeleteSubscriptionRequest request;
    request.set_id(id);
    v1::DeleteSubscriptionResponse response;
    connection.Unary(
        [&](grpc::ClientContext* c) { return stub->DeleteSubscription(c, request, &response); });
    if (context.format() == OutputFormat::kTable) context.out() << "Webhook " << id << " deleted\n";
  }
  return kExitOk;
}

struct NotificationOptions {
  std::string webhook;
  int limit = 50;
};

int GetNotifications(CommandContext& context, const NotificationOptions& o) {
  Connection& connection = context.connection();
  auto stub = v1::NotificationService::NewStub(connection.channel());
  v1::ListNotificationsRequest request;
  request.set_subscription_id(o.webhook);
  request.set_limit(o.limit);
  v1::ListNotificationsResponse response;
  connection.Unary(
      [&](grpc::ClientContext* c) { return stub->ListNotifications(c, request, &response); });
  if (PrintIfStructured(context, MessagesToJson(response.notifications()))) return kExitOk;
  Table table({"ID", "WEBHOOK", "EVENT", "ABOUT", "STATE", "ATTEMPTS", "TIME", "LAST ERROR"});
  for (const auto& n : response.notifications()) {
    std::string state = Without(v1::NotificationState_Name(n.state()), "NOTIFICATION_STATE_");
    if (n.state() == v1::NOTIFICATION_STATE_PENDING && n.attempts() > 0) {
      state += ", next " + FormatTimestamp(n.next_attempt_at());
    }
    table.AddRow({std::to_string(n.id()), n.subscription_id(), EventText(n.event()), n.subject(),
                  state, std::to_string(n.attempts()),
                  FormatTimestamp(n.state() == v1::NOTIFICATION_STATE_DELIVERED ? n.delivered_at()
                                                                                : n.event_time()),
                  n.last_error()});
  }
  table.Print(context.out());
  return kExitOk;
}

}  // namespace

void AddWebhookCommands(CLI::App& app, ActionSlot& slot) {
  auto o = std::make_shared<CreateWebhookOptions>();
  CLI::App* create = app.get_subcommand("create");
  CLI::App* webhook = create->add_subcommand(
      "webhook", "Tell a webhook what happens to your runs (or your team's, or nodes)");
  webhook
      ->add_option("URL", o->url,
                   "Where to POST: https://... (http:// only to this machine's loopback)")
      ->required();
  webhook->add_option("--format", o->format,
                      "slack ({\"text\": ...}, the default) or generic (every field, signed)");
  webhook->add_option(
      "--events", o->events,
      "Comma-separated: failed, completed, stopped, resumed, queued, rolled-back (default: "
      "failed, "
      "completed, resumed); with --nodes: cordoned, returned (the default)");
  webhook->add_option("--team", o->team, "Your team's runs rather than yours");
  webhook->add_flag("--nodes", o->nodes, "Nodes cordoned and returned (operators)");
  webhook->add_option("--queue-bound", o->queue_bound,
                      "With the queued event: how long a run may wait first (default 1h)");
  webhook->add_option("--secret-file", o->secret_file,
                      "generic: the signing secret from this file, or - for standard input");
  webhook->add_option("--secret-env", o->secret_env,
                      "generic: the signing secret from this environment variable");
  OnParsed(webhook, slot, [o](CommandContext& context) { return CreateWebhook(context, *o); });

  CLI::App* get = app.get_subcommand("get");
  CLI::App* get_webhooks = get->add_subcommand("webhooks", "List your webhooks");
  OnParsed(get_webhooks, slot, [](CommandContext& context) { return GetWebhooks(context); });
  auto n = std::make_shared<NotificationOptions>();
  CLI::App* get_notifications =
      get->add_subcommand("notifications", "What your webhooks were sent, newest first");
  get_notifications->add_option("--webhook", n->webhook, "Only this webhook's");
  get_notifications->add_option("--limit", n->limit, "How many (default 50, at most 1000)");
  OnParsed(get_notifications, slot,
           [n](CommandContext& context) { return GetNotifications(context, *n); });

  auto ids = std::make_shared<std::vector<std::string>>();
  CLI::App* remove = app.get_subcommand("delete");
  CLI::App* delete_webhook = remove->add_subcommand("webhook", "Delete webhooks");
  delete_webhook->add_option("ID", *ids, "Webhook IDs")->required();
  OnParsed(delete_webhook, slot,
           [ids](CommandContext& context) { return DeleteWebhooks(context, *ids); });
}

}  // namespace tessera::cli
