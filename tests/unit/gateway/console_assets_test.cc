// The web console's files as the gateway serves them: loaded once from a flat folder, looked up
// by name only, index.html for the console's own paths, ETags and the security headers.
#include "services/gateway/console_assets.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "services/gateway/dispatch.h"
#include "services/gateway/route_table.h"

namespace tessera::gateway {
namespace console_assets_test {

namespace fs = std::filesystem;

struct Folder {
  Folder() {
    path = fs::temp_directory_path() /
           ("tessera-console-test-" + std::to_string(::getpid()) + "-" + std::to_string(++count));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
  }
  fs::path path;
  static inline int count = 0;
};

std::string HeaderOf(const Response& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

std::shared_ptr<const ConsoleAssets> LoadConsole(const Folder& folder) {
  auto loaded = ConsoleAssets::Load(folder.path.string());
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  return *loaded;
}

TEST_CASE("the console's files are served by name with their types", "[gateway][console]") {
  Folder folder;
  folder.Write("index.html", "<!doctype html><title>Tessera</title>");
  folder.Write("app.js", "export const x = 1;");
  folder.Write("app.css", "body{}");
  fs::create_directories(folder.path / "sub");
  std::ofstream(folder.path / "sub" / "secret.js") << "no";
  const auto console = LoadConsole(folder);
  CHECK(console->file_count() == 3);

  Response js = console->Serve("/assets/app.js", "");
  CHECK(js.status == 200);
  CHECK(js.body == "export const x = 1;");
  CHECK(js.content_type == "text/javascript; charset=utf-8");
  CHECK(console->Serve("/assets/app.css", "").content_type == "text/css; charset=utf-8");

  // Subfolders, traversal and unknown names are simply not there.
  for (const char* path : {"/assets/sub/secret.js", "/assets/../index.html", "/assets/nope.js",
                           "/assets/", "/assets/%2e%2e/x"}) {
    INFO(path);
    const Response r = console->Serve(path, "");
    CHECK(r.status == 404);
    CHECK(r.body.find("the console has no file") != std::string::npos);
  }
}

TEST_CASE("the console's own paths load index.html", "[gateway][console]") {
  Folder folder;
  folder.Write("index.html", "<!doctype html><p>console</p>");
  const auto console = LoadConsole(folder);
  for (const char* path : {"/", "/runs", "/runs/train-1", "/nodes", "/health"}) {
    INFO(path);
    const Response r = console->Serve(path, "");
    CHECK(r.status == 200);
    CHECK(r.body == "<!doctype html><p>console</p>");
    CHECK(r.content_type == "text/html; charset=utf-8");
    const std::string csp = HeaderOf(r, "Content-Security-Policy");
    CHECK(csp.find("default-src 'self'") != std::string::npos);
    CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
    CHECK(csp.find("script-src") == std::string::npos);  // scripts: 'self' only, none inline
    CHECK(HeaderOf(r, "X-Content-Type-Options") == "nosniff");
    CHECK(HeaderOf(r, "Cache-Control") == "no-cache");
  }
}

TEST_CASE("an unchanged file answers 304 to its ETag", "[gateway][console]") {
  Folder folder;
  folder.Write("index.html", "v1");
  const std::string etag = HeaderOf(LoadConsole(folder)->Serve("/", ""), "ETag");
  CHECK(etag.size() == 34);  // 16 bytes in hex, quoted
  CHECK(etag.front() == '"');
  const auto console = LoadConsole(folder);
  const Response again = console->Serve("/", etag);
  CHECK(again.status == 304);
  CHECK(again.body.empty());
  CHECK(console->Serve("/", "W/\"other\", " + etag).status == 304);
  CHECK(console->Serve("/", "\"other\"").status == 200);

  folder.Write("index.html", "v2");  // a new console: a new tag
  const Response changed = LoadConsole(folder)->Serve("/", etag);
  CHECK(changed.status == 200);
  CHECK(changed.body == "v2");
  CHECK(HeaderOf(changed, "ETag") != etag);
}

TEST_CASE("a folder that is no console is refused with the reason", "[gateway][console]") {
  Folder folder;
  auto missing = ConsoleAssets::Load((folder.path / "nope").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("is not a folder") != std::string::npos);

  folder.Write("app.js", "x");
  auto no_index = ConsoleAssets::Load(folder.path.string());
  REQUIRE_FALSE(no_index.ok());
  CHECK(no_index.status().message().find("has no index.html") != std::string::npos);

  for (std::size_t i = 0; i < ConsoleAssets::kMaxFiles; ++i) {
    folder.Write("f" + std::to_string(i) + ".js", "x");
  }
  folder.Write("index.html", "x");
  auto too_many = ConsoleAssets::Load(folder.path.string());
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message().find("more than 256 files") != std::string::npos);
}

TEST_CASE("the flag: none, a folder, or auto", "[gateway][console]") {
  CHECK(ConsoleAssets::ResolveFlag("none").empty());
  CHECK(ConsoleAssets::ResolveFlag("/srv/console") == "/srv/console");
  // The test binary has no console beside it.
  CHECK(ConsoleAssets::ResolveFlag("auto") == ConsoleAssets::DefaultFolder().value_or(""));
}

TEST_CASE("the gateway serves the console outside /api/ only", "[gateway][console]") {
  Folder folder;
  folder.Write("index.html", "page");
  folder.Write("app.js", "js");
  RouteTable table;
  table.Add(Route{.method = "GET",
                  .path = "/api/v1/runs",
                  .operation_id = "listRuns",
                  .tag = "runs",
                  .summary = "",
                  .handler = [](const Request&) -> HandlerResult {
                    Response r;
                    r.body = "runs";
                    return r;
                  }});
  REQUIRE(table.status().ok());
  auto get = [&](const std::string& target, const std::string& method = "GET") {
    WireRequest wire;
    wire.method = method;
    wire.target = target;
    HandlerResult result = Dispatch(table, std::move(wire));
    REQUIRE(std::holds_alternative<Response>(result));
    return std::get<Response>(std::move(result));
  };
  // Without a console: a 404 that says so.
  Response none = get("/");
  CHECK(none.status == 404);
  CHECK(none.body.find("the web console is not installed") != std::string::npos);

  table.SetConsole(LoadConsole(folder));
  CHECK(get("/").body == "page");
  CHECK(get("/runs/train-1?x=1#top").body == "page");
  CHECK(get("/assets/app.js").body == "js");
  CHECK(get("/api/v1/runs").body == "runs");
  // The API keeps its own 404s and 405s.
  Response api_404 = get("/api/v1/nope");
  CHECK(api_404.status == 404);
  CHECK(api_404.body.find("no route for /api/v1/nope") != std::string::npos);
  CHECK(get("/api/v1/runs", "DELETE").status == 405);
  CHECK(get("/", "POST").status == 404);
}

}  // namespace console_assets_test
}  // namespace tessera::gateway
