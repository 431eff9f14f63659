// -o json / -o yaml: protobuf JSON with proto field names, and the same document as YAML.

#include "cli/output.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "cli/errors.h"
#include "cli/names.h"
#include "tessera/v1/runs.pb.h"

namespace output_test {

using tessera::cli::CliError;
using tessera::cli::Json;
using tessera::cli::OutputFormat;

tessera::v1::Run SampleRun() {
  tessera::v1::Run run;
  run.set_name("train-1");
  run.set_status(tessera::v1::RUN_STATUS_RUNNING);
  run.set_resumption_index(2);
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  run.mutable_spec()->set_command("echo one\necho two");
  run.mutable_spec()->set_image("line\n");
  (*run.mutable_spec()->mutable_metadata())["script"] = "a\nb\n";
  (*run.mutable_spec()->mutable_metadata())["flag"] = "true";
  (*run.mutable_spec()->mutable_metadata())["number"] = "123";
  run.mutable_created_at()->set_seconds(1'700'000'000);
  return run;
}

TEST_CASE("JSON uses proto field names and keeps default values", "[cli][output]") {
  const Json json = tessera::cli::MessageToJson(SampleRun());
  CHECK(json["name"] == "train-1");
  CHECK(json["status"] == "RUN_STATUS_RUNNING");
  CHECK(json["resumption_index"] == 2);
  CHECK(json["spec"]["compute"]["gpus"] == 8);
  CHECK(json["created_at"] == "2023-11-14T22:13:20Z");
  // Fields at their default are present, so that scripts see a stable shape.
  CHECK(json.contains("retries_used"));
  CHECK(json.contains("status_reason"));
  // Keys keep the proto's field order.
  CHECK(json.begin().key() == "id");
}

TEST_CASE("lists are JSON arrays", "[cli][output]") {
  std::vector<tessera::v1::Run> runs = {SampleRun(), SampleRun()};
  const Json array = tessera::cli::MessagesToJson(runs);
  REQUIRE(array.is_array());
  CHECK(array.size() == 2);
  std::ostringstream out;
  tessera::cli::PrintDocument(out, OutputFormat::kJson, array);
  CHECK(Json::parse(out.str()) == array);
}

TEST_CASE("YAML reads back to the same values and types", "[cli][output]") {
  const Json json = tessera::cli::MessageToJson(SampleRun());
  const YAML::Node yaml = YAML::Load(tessera::cli::JsonToYaml(json));
  CHECK(yaml["name"].as<std::string>() == "train-1");
  CHECK(yaml["resumption_index"].as<int>() == 2);
  CHECK(yaml["spec"]["command"].as<std::string>() == "echo one\necho two");
  CHECK(yaml["spec"]["image"].as<std::string>() == "line\n");
  CHECK(yaml["spec"]["metadata"]["script"].as<std::string>() == "a\nb\n");
  // Strings that look like other types stay strings.
  CHECK(yaml["spec"]["metadata"]["flag"].Tag() == "!");
  CHECK(yaml["spec"]["metadata"]["flag"].as<std::string>() == "true");
  CHECK(yaml["spec"]["metadata"]["number"].Tag() == "!");
  CHECK(yaml["status_reason"].Tag() == "!");
  CHECK(yaml["status_reason"].as<std::string>().empty());
  CHECK(yaml["stop_requested"].as<bool>() == false);
}

TEST_CASE("streamed documents are one per line or one per YAML document", "[cli][output]") {
  std::ostringstream json;
  tessera::cli::PrintStreamedDocument(json, OutputFormat::kJson, Json{{"a", 1}});
  tessera::cli::PrintStreamedDocument(json, OutputFormat::kJson, Json{{"a", 2}});
  CHECK(json.str() == "{\"a\":1}\n{\"a\":2}\n");
  std::ostringstream yaml;
  tessera::cli::PrintStreamedDocument(yaml, OutputFormat::kYaml, Json{{"a", 1}});
  tessera::cli::PrintStreamedDocument(yaml, OutputFormat::kYaml, Json{{"a", 2}});
  CHECK(YAML::LoadAll(yaml.str()).size() == 2);
}

TEST_CASE("output formats", "[cli][output]") {
  CHECK(tessera::cli::ParseOutputFormat("table") == OutputFormat::kTable);
  CHECK(tessera::cli::ParseOutputFormat("JSON") == OutputFormat::kJson);
  CHECK(tessera::cli::ParseOutputFormat("yaml") == OutputFormat::kYaml);
  CHECK_THROWS_AS(tessera::cli::ParseOutputFormat("xml"), CliError);
}

TEST_CASE("enum names are short in output and lenient on input", "[cli][output]") {
  using tessera::cli::ParseEnum;
  using tessera::cli::ShortName;
  CHECK(ShortName(tessera::v1::RUN_STATUS_RUNNING) == "RUNNING");
  CHECK(ShortName(tessera::v1::RUN_STATUS_UNSPECIFIED) == "-");
  CHECK(ShortName(tessera::v1::ATTEMPT_END_REASON_NODE_FAILURE) == "NODE_FAILURE");
  CHECK(ParseEnum<tessera::v1::RunStatus>("--status", "running") ==
        tessera::v1::RUN_STATUS_RUNNING);
  CHECK(ParseEnum<tessera::v1::RunStatus>("--status", "RUN_STATUS_FAILED") ==
        tessera::v1::RUN_STATUS_FAILED);
  CHECK(tessera::cli::ParsePriority("--priority", "auto") == tessera::v1::PRIORITY_MEDIUM);
  CHECK(tessera::cli::ParsePriority("--priority", "High") == tessera::v1::PRIORITY_HIGH);
  try {
    ParseEnum<tessera::v1::RunStatus>("--status", "bogus");
    FAIL("expected an error");
  } catch (const CliError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Catch::Contains("--status") && Catch::Contains("running") &&
                             !Catch::Contains("unspecified"));
  }
}

}  // namespace output_test
