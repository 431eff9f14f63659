// POST /api/v1/runs and PATCH /api/v1/runs/{name} take a run spec's values as the run YAML
// does: JSON specs read by the run spec parser (priority "low" as well as "PRIORITY_LOW", older
// mcli fields, names made valid), the run YAML itself as the body, notes in a Warning header.
#include "services/gateway/run_bodies.h"
#include "tests/unit/gateway/gateway_fixture.h"

namespace tessera::gateway::testing {
namespace gateway_run_bodies_test {

const char kYaml[] = R"(# an llm-foundry style run YAML
run_name: Mosaic_GPT-1b
gpu_num: 8
cluster: r0z0
image: mosaicml/pytorch:latest
command: |
  composer train.py
scheduling:
  priority: low
)";

TEST_CASE("a JSON spec's priority takes the run YAML's forms", "[gateway][run_spec]") {
  GatewayFixture f;
  for (const char* priority : {"low", "LOW", "Low", "PRIORITY_LOW", "priority_low"}) {
    INFO(priority);
    const HttpResult r = f.Send(
        "POST", "/api/v1/runs",
        std::string(R"({"spec": {"name": "train", "command": "x", "scheduling": {"priority": ")") +
            priority + "\"}}}");
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun").spec().scheduling().priority() ==
          v1::PRIORITY_LOW);
    CHECK(r.headers.count("warning") == 0);
  }
  const HttpResult r =
      f.Send("POST", "/api/v1/runs",
             R"({"spec": {"name": "a", "command": "x", "scheduling": {"priority": "auto"}}})");
  REQUIRE(r.status == 200);
  CHECK(f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun").spec().scheduling().priority() ==
        v1::PRIORITY_MEDIUM);
}

TEST_CASE("a JSON spec takes mcli's older fields and names, noted in a Warning header",
          "[gateway][run_spec]") {
  GatewayFixture f;
  const HttpResult r = f.Send("POST", "/api/v1/runs",
                              R"({"idempotency_key": "k1",
                                  "spec": {"run_name": "My_Run", "command": "x", "gpu_num": 8,
                                           "scheduling": {"max_duration": 2}}})");
  INFO(r.body);
  REQUIRE(r.status == 200);
  const auto req = f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun");
  CHECK(req.idempotency_key() == "k1");
  CHECK(req.spec().name() == "my-run");
  CHECK(req.spec().compute().gpus() == 8);
  CHECK(req.spec().scheduling().max_duration_hours() == 2);
  const std::string warning = r.headers.at("warning");
  CHECK_THAT(warning, Catch::StartsWith("299 - \"run_name: read as name"));
  CHECK_THAT(warning, Catch::Contains("299 - \"gpu_num: read as compute.gpus"));
  CHECK_THAT(warning, Catch::Contains("changed to \\\"my-run\\\""));
}

TEST_CASE("a JSON spec's mistakes are one 400 naming the field", "[gateway][run_spec]") {
  GatewayFixture f;
  SECTION("a priority that is none") {
    const HttpResult r =
        f.Send("POST", "/api/v1/runs",
               R"({"spec": {"name": "a", "command": "x", "scheduling": {"priority": "urgent"}}})");
    CHECK(r.status == 400);
    CHECK(r.ErrorCode() == "INVALID_ARGUMENT");
    CHECK_THAT(r.ErrorMessage(),
               Catch::StartsWith("request body: spec: scheduling.priority: must be one of high, "
                                 "medium, low, lowest, auto"));
  }
  SECTION("a rule of the spec") {
    const HttpResult r =
        f.Send("POST", "/api/v1/runs",
               R"({"spec": {"name": "a", "command": "x", "compute": {"gpus": -1}}})");
    CHECK(r.status == 400);
    CHECK(r.ErrorMessage() ==
          "request body: spec: compute.gpus: must be a non-negative integer, got -1");
  }
  SECTION("an unknown field of the request, outside the spec") {
    const HttpResult r =
        f.Send("POST", "/api/v1/runs", R"({"spec": {"name": "a", "command": "x"}, "nope": 1})");
    CHECK(r.status == 400);
    CHECK_THAT(r.ErrorMessage(), Catch::Contains("nope"));
  }
  CHECK(f.rec.count() == 0);
}

TEST_CASE("POST /api/v1/runs takes the run YAML itself", "[gateway][run_spec]") {
  GatewayFixture f;
  for (const char* type : {"application/yaml", "text/yaml", "application/x-yaml",
                           "application/yaml; charset=utf-8", "text/plain", ""}) {
    INFO("Content-Type: " << type);
    std::map<std::string, std::string> headers = {{"Idempotency-Key", "y1"}};
    if (*type != '\0') headers["Content-Type"] = type;
    const HttpResult r = f.Send("POST", "/api/v1/runs", kYaml, kGoodAuth, headers);
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun");
    CHECK(req.idempotency_key() == "y1");
    CHECK(req.spec().name() == "mosaic-gpt-1b");
    CHECK(req.spec().compute().gpus() == 8);
    CHECK(req.spec().compute().cluster() == "r0z0");
    CHECK(req.spec().command() == "composer train.py\n");
    CHECK(req.spec().scheduling().priority() == v1::PRIORITY_LOW);
    CHECK_THAT(r.headers.at("warning"), Catch::Contains("run_name: read as name"));
  }
}

TEST_CASE("a run YAML body's mistakes are a 400 with the line", "[gateway][run_spec]") {
  GatewayFixture f;
  const HttpResult r = f.Send("POST", "/api/v1/runs", "name: a\ncommand: x\ncompute:\n  gpus: -4\n",
                              kGoodAuth, {{"Content-Type", "application/yaml"}});
  CHECK(r.status == 400);
  CHECK(r.ErrorMessage() ==
        "request body: line 4, column 9: compute.gpus: must be a non-negative integer, got -4");
  SECTION("JSON sent as YAML is read as the YAML it also is") {
    const HttpResult j = f.Send("POST", "/api/v1/runs", R"({"name": "a", "command": "x"})",
                                kGoodAuth, {{"Content-Type", "application/yaml"}});
    CHECK(j.status == 200);
    CHECK(f.rec.LastAs<v1::SubmitRunRequest>("SubmitRun").spec().name() == "a");
  }
}

TEST_CASE("PATCH takes the run YAML's priority forms", "[gateway][run_spec]") {
  GatewayFixture f;
  for (const char* priority : {"low", "LOW", "PRIORITY_LOW"}) {
    INFO(priority);
    const HttpResult r = f.Send("PATCH", "/api/v1/runs/train-1",
                                std::string(R"({"priority": ")") + priority + "\"}");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto req = f.rec.LastAs<v1::UpdateRunRequest>("UpdateRun");
    CHECK(req.name() == "train-1");
    REQUIRE(req.has_priority());
    CHECK(req.priority() == v1::PRIORITY_LOW);
  }
  const HttpResult bad = f.Send("PATCH", "/api/v1/runs/train-1", R"({"priority": "urgent"})");
  CHECK(bad.status == 400);
  CHECK_THAT(bad.ErrorMessage(), Catch::Contains("priority"));
}

TEST_CASE("the OpenAPI document says POST /api/v1/runs takes YAML", "[gateway][openapi]") {
  GatewayFixture f;
  const HttpResult r = f.Send("GET", "/api/v1/openapi.json");
  REQUIRE(r.status == 200);
  const auto content = r.Json()["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"];
  CHECK(content.contains("application/json"));
  CHECK(content["application/yaml"]["schema"]["type"] == "string");
}

TEST_CASE("which bodies are YAML", "[gateway][run_spec]") {
  auto is_yaml = [](const std::string& type, const std::string& body) {
    Request r;
    r.content_type = type;
    r.body = body;
    return IsYamlBody(r);
  };
  CHECK(is_yaml("application/yaml", "{}"));
  CHECK(is_yaml("Text/YAML; charset=utf-8", ""));
  CHECK(is_yaml("", "name: a\n"));
  CHECK(is_yaml("application/x-www-form-urlencoded", "# a comment\nname: a\n"));
  CHECK_FALSE(is_yaml("", "  {\"spec\": {}}"));
  CHECK_FALSE(is_yaml("", "[1]"));
  CHECK_FALSE(is_yaml("", ""));
  CHECK_FALSE(is_yaml("application/json", "name: a"));
  CHECK_FALSE(is_yaml("application/merge-patch+json", "name: a"));
}

TEST_CASE("notes become one Warning header value", "[gateway][run_spec]") {
  CHECK(WarningHeader({"a: b", "say \"hi\" \\ \x01 \xc3\xa9"}) ==
        "299 - \"a: b\", 299 - \"say \\\"hi\\\" \\\\ ? ??\"");
  std::vector<std::string> many(25, "n");
  const std::string header = WarningHeader(many);
  CHECK_THAT(header, Catch::EndsWith("299 - \"and 5 more notes about the spec\""));
}

}  // namespace gateway_run_bodies_test
}  // namespace tessera::gateway::testing
