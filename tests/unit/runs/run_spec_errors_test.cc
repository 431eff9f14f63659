// ParseRunSpec on invalid run YAML: every error is one InvalidArgument that names the field and
// the line (and column) where it is written.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runspec/run_spec_parser.h"

namespace run_spec_errors_test {

using tessera::spec::ParseRunSpec;

// name and command, so that the section under test starts at line 3.
constexpr const char* kHead = "name: a\ncommand: x\n";

struct BadSpec {
  const char* label;
  std::string yaml;
  std::string field;  // must appear in the message ("" for document-level errors)
  int line;
  int column = 0;    // checked when not 0
  std::string says;  // another substring the message must contain, when not empty
};

std::string Head(const std::string& rest) { return kHead + rest; }

std::string Nested(int depth) {
  std::string open(depth, '[');
  std::string close(depth, ']');
  return Head("parameters:\n  deep: " + open + close + "\n");
}

std::string BlockNested(int depth) {
  std::string yaml = Head("parameters:\n");
  for (int i = 0; i < depth; ++i) yaml += std::string(2 * (i + 1), ' ') + "k:\n";
  yaml += std::string(2 * (depth + 1), ' ') + "v: 1\n";
  return yaml;
}

std::vector<BadSpec> BadSpecs() {
  return {
      {"unknown top-level field", Head("foo: 1\n"), "\"foo\"", 3, 1, "unknown field"},
      {"unknown nested field", Head("compute:\n  gpus: 8\n  gpu: 8\n"), "\"compute.gpu\"", 5, 3,
       "known: cluster, gpus, gpu_type"},
      {"unknown field suggests", Head("scheduling:\n  max_retry: 3\n"), "scheduling.max_retry", 4,
       3, "did you mean \"max_retries\""},
      {"unknown field suggests a near name", Head("compute:\n  gpu: 8\n"), "compute.gpu", 4, 3,
       "did you mean \"gpus\""},
      {"compute is a list", Head("compute: [1, 2]\n"), "compute", 3, 10, "must be a mapping"},
      {"compute is a string", Head("compute: big\n"), "compute", 3, 10, "must be a mapping"},
      {"scheduling is a list", Head("scheduling:\n  - high\n"), "scheduling", 4, 3,
       "must be a mapping"},
      {"env_variables is a string", Head("env_variables: FOO=1\n"), "env_variables", 3, 16,
       "must be a mapping {NAME: value} or a sequence"},
      {"env list item is a string", Head("env_variables:\n  - FOO=1\n"), "env_variables[0]", 4, 5,
       ""},
      {"env value is a mapping", Head("env_variables:\n  FOO: {a: 1}\n"), "env_variables[0].value",
       4, 8, "must be a string, number or boolean"},
      {"env value is null", Head("env_variables:\n  FOO:\n"), "env_variables[0].value", 4, 3,
       "got null"},
      {"env list entry without value", Head("env_variables:\n  - key: FOO\n"),
       "env_variables[0].value", 4, 0, "required field is missing"},
      {"env list entry unknown field", Head("env_variables:\n  - {key: A, value: b, x: 1}\n"),
       "env_variables[0].x", 4, 0, "unknown field"},
      {"negative gpus", Head("compute:\n  gpus: -4\n"), "compute.gpus", 4, 9,
       "must be a non-negative integer, got -4"},
      {"float gpus", Head("compute:\n  gpus: 2.5\n"), "compute.gpus", 4, 9,
       "must be a non-negative integer, got 2.5"},
      {"string gpus", Head("compute:\n  gpus: \"8\"\n"), "compute.gpus", 4, 9, "got \"8\""},
      {"huge gpus", Head("compute:\n  gpus: 99999999999\n"), "compute.gpus", 4, 9, "out of range"},
      {"gpus not divisible by nodes", Head("compute:\n  gpus: 6\n  nodes: 4\n"), "compute.gpus", 4,
       9, "compute.nodes"},
      {"zero nodes", Head("compute:\n  nodes: 0\n"), "compute.nodes", 4, 10,
       "must be a positive integer"},
      {"negative procs_per_node", Head("compute:\n  procs_per_node: -2\n"),
       "compute.procs_per_node", 4, 19, "must be a positive integer"},
      {"negative min_nodes", Head("compute:\n  nodes: 2\n  min_nodes: -1\n"), "compute.min_nodes",
       5, 14, "must be a positive integer"},
      {"min_nodes without nodes", Head("compute:\n  gpus: 16\n  min_nodes: 1\n"),
       "compute.min_nodes", 5, 14, "needs compute.nodes"},
      {"min_nodes above nodes", Head("compute:\n  nodes: 2\n  min_nodes: 3\n"), "compute.min_nodes",
       5, 14, "is 3 but compute.nodes is 2; it must be at most compute.nodes"},
      {"min_nodes with node_names",
       Head("compute:\n  nodes: 2\n  node_names: [a, b]\n  min_nodes: 1\n"), "compute.min_nodes", 6,
       14, "cannot go with compute.node_names"},
      {"node_names count mismatch", Head("compute:\n  nodes: 2\n  node_names: [n1]\n"),
       "compute.node_names", 5, 15, "has 1 node name(s) but compute.nodes is 2"},
      {"duplicate node name", Head("compute:\n  node_names:\n    - n1\n    - n1\n"),
       "compute.node_names[1]", 6, 7, "duplicate node name"},
      {"node name not a string", Head("compute:\n  node_names: [n1, [n2]]\n"),
       "compute.node_names[1]", 4, 20, "must be a string"},
      {"empty command", "name: a\ncommand: \"\"\n", "command", 2, 10, "required field"},
      {"whitespace-only command", "name: a\ncommand: \" \\n\\t \"\n", "command", 2, 10,
       "only whitespace"},
      {"missing command", "name: a\n", "command", 1, 1, "required field is missing"},
      {"missing name", "# comment\ncommand: x\n", "name", 2, 1, "required field is missing"},
      {"name is a number", "name: 123\ncommand: x\n", "name", 1, 7, "must be a string"},
      // Longer than mcli's 56 characters: mcli refuses it too (shorter ones are made valid).
      {"name too long", absl::StrCat("name: ", std::string(57, 'a'), "\ncommand: x\n"), "name", 1,
       7, "57 characters long"},
      {"name too long to be made valid",
       absl::StrCat("name: My_", std::string(60, 'x'), "\ncommand: x\n"), "name", 1, 7,
       "63 characters long"},
      {"empty name", "name: ''\ncommand: x\n", "name", 1, 7, "required field"},
      {"run_name too long", absl::StrCat("run_name: ", std::string(57, 'a'), "\ncommand: x\n"),
       "run_name (read as name)", 1, 11, "57 characters long"},
      {"run_name not a string", "run_name: 12\ncommand: x\n", "run_name", 1, 11,
       "must be a string"},
      {"command and entrypoint", "name: a\ncommand: x\nentrypoint: y\n", "entrypoint", 3, 13,
       "give command or entrypoint"},
      {"optimization_level out of range", Head("optimization_level: 5\n"), "optimization_level", 3,
       21, "0, 1, 2 or 3"},
      {"gpu_num not a number", Head("gpu_num: '8'\n"), "gpu_num", 3, 10,
       "must be a non-negative integer"},
      {"gpu_num breaks a rule of compute.gpus", Head("gpu_num: 6\ncompute:\n  nodes: 4\n"),
       "gpu_num (read as compute.gpus)", 3, 10, "cannot be spread evenly"},
      {"cluster not a string", Head("cluster: [a]\n"), "cluster", 3, 10, "must be a string"},
      {"dependent_deployment not a mapping", Head("dependent_deployment: x\n"),
       "dependent_deployment", 3, 23, "must be a mapping"},
      {"compute.cpus not a number", Head("compute:\n  cpus: many\n"), "compute.cpus", 4, 9,
       "must be a non-negative integer"},
      {"a field under two spellings",
       Head("scheduling:\n  retry_on_system_failure: true\n"
            "  watchdogEnabled: false\n"),
       "scheduling.watchdogEnabled", 5, 3,
       "is given twice (also as scheduling.retry_on_system_failure)"},
      {"integration type twice",
       Head("integrations:\n  - integration_type: pip\n    type: apt_packages\n"),
       "integrations[0].type", 5, 5, "is given twice (also as integrations[0].integration_type)"},
      {"protobuf JSON name in YAML", Head("scheduling:\n  max_duration_hours: 2\n"),
       "scheduling.max_duration_hours", 4, 3, "did you mean \"max_duration\""},
      {"priority urgent", Head("scheduling:\n  priority: urgent\n"), "scheduling.priority", 4, 13,
       "one of high, medium, low, lowest, auto"},
      {"preemptible y", Head("scheduling:\n  preemptible: y\n"), "scheduling.preemptible", 4, 16,
       "y and n are not booleans"},
      {"preemptible quoted yes", Head("scheduling:\n  preemptible: 'yes'\n"),
       "scheduling.preemptible", 4, 16, "must be true or false"},
      {"max_retries too many", Head("scheduling:\n  max_retries: 5000\n"), "scheduling.max_retries",
       4, 16, "between 0 and 1000"},
      {"max_retries negative", Head("scheduling:\n  max_retries: -1\n"), "scheduling.max_retries",
       4, 16, "between 0 and 1000"},
      {"max_duration zero", Head("scheduling:\n  max_duration: 0\n"), "scheduling.max_duration", 4,
       17, "positive number of hours"},
      {"max_duration negative", Head("scheduling:\n  max_duration: -1.5\n"),
       "scheduling.max_duration", 4, 17, "positive number of hours"},
      {"max_duration infinite", Head("scheduling:\n  max_duration: .inf\n"),
       "scheduling.max_duration", 4, 17, "positive number of hours"},
      {"hang_timeout string", Head("scheduling:\n  hang_timeout: 10s\n"), "scheduling.hang_timeout",
       4, 17, "got \"10s\""},
      {"mfu_threshold above 1", Head("scheduling:\n  mfu_threshold: 1.5\n"),
       "scheduling.mfu_threshold", 4, 18, "between 0 and 1"},
      // yaml-cpp reports an unclosed flow sequence where the input ends.
      {"YAML syntax error", Head("compute:\n  node_names: [a, b\n"), "", 5, 1, "YAML syntax error"},
      {"bad indentation", "name: a\n  command: x\n", "", 2, 0, "YAML syntax error"},
      {"duplicate key", Head("compute:\n  gpus: 8\n  gpus: 4\n"), "compute.gpus", 5, 3,
       "duplicate key (first defined at line 4)"},
      {"duplicate top-level key", "name: a\ncommand: x\nname: b\n", "name", 3, 1, "duplicate key"},
      {"reserved env var", Head("env_variables:\n  FOO: 1\n  RANK: 3\n"), "env_variables[1].key", 5,
       3, "\"RANK\" is set by the platform"},
      {"reserved env var in list form",
       Head("env_variables:\n  - key: CUDA_VISIBLE_DEVICES\n    value: 0\n"),
       "env_variables[0].key", 4, 10, "set by the platform"},
      {"bad env var name", Head("env_variables:\n  1FOO: x\n"), "env_variables[0].key", 4, 3,
       "not a valid environment variable name"},
      {"env var name with dash", Head("env_variables:\n  - {key: MY-VAR, value: x}\n"),
       "env_variables[0].key", 4, 0, "not a valid environment variable name"},
      {"duplicate env var in list form",
       Head("env_variables:\n  - {key: A, value: x}\n  - {key: A, value: y}\n"),
       "env_variables[1].key", 5, 0, "duplicate environment variable"},
      {"document is a list", "- name: a\n- command: x\n", "", 1, 1, "must be a mapping"},
      {"document is a scalar", "just text\n", "", 1, 1, "must be a mapping"},
      {"empty document", "", "", 1, 1, "empty"},
      {"comment-only document", "# nothing here\n", "", 1, 1, "empty"},
      {"null document", "---\n...\n", "", 1, 1, "empty"},
      {"two documents", "name: a\ncommand: x\n---\nname: b\n", "", 3, 1, "single YAML document"},
      {"stray comma after the document", "[a],\n", "", 1, 0, "single YAML document"},
      {"lone comma", ",", "", 1, 0, "single YAML document"},
      {"too deep flow nesting", Nested(70), "parameters.deep", 4, 0, "deeper than 64"},
      {"too deep block nesting", BlockNested(70), "parameters.k.k", 0, 0, "deeper than 64"},
      {"parameters is a list", Head("parameters: [1, 2]\n"), "parameters", 3, 13,
       "must be a mapping"},
      {"parameter not finite", Head("parameters:\n  lr: 1\n  inf: -.inf\n"), "parameters.inf", 5, 8,
       "must be a finite number"},
      {"parameter nan in a list", Head("parameters:\n  xs: [1, .nan]\n"), "parameters.xs[1]", 4, 11,
       "finite"},
      {"metadata empty key", Head("metadata:\n  \"\": x\n"), "metadata", 4, 0, "keys must not"},
      {"integrations not a list", Head("integrations: {integration_type: pip}\n"), "integrations",
       3, 15, "must be a sequence"},
      {"integration without type", Head("integrations:\n  - pip: [x]\n"),
       "integrations[0].integration_type", 4, 5, "required field is missing"},
      {"integration type not a string", Head("integrations:\n  - integration_type: [x]\n"),
       "integrations[0].integration_type", 4, 23, "must be a string"},
      {"empty integration type", Head("integrations:\n  - integration_type: ''\n"),
       "integrations[0].integration_type", 4, 23, "required field"},
      {"unsupported tag", Head("image: !docker foo\n"), "image", 3, 8, "unsupported YAML tag"},
      {"complex key", Head("? [a]\n: b\n"), "", 3, 3, "mapping keys must be strings"},
      {"null key", Head("parameters:\n  ~: 1\n"), "parameters", 4, 3, "mapping keys"},
      {"invalid UTF-8", Head("image: \"\\xff\"\n") + "parameters: {x: \"\xff\xfe\"}\n",
       "parameters.x", 4, 0, "UTF-8"},
      // Found by the fuzzer: yaml-cpp's emitter writes noncharacters as U+FFFD, so they could
      // not round trip; they are rejected like invalid UTF-8.
      {"noncharacter from an escape", Head("parameters:\n  u: \"a\\U000FFFFF\"\n"), "parameters.u",
       4, 6, "text contains U+FFFFF, a Unicode noncharacter"},
      {"noncharacter in a key", Head("metadata: {\"\xef\xb7\x90\": x}\n"), "metadata", 3, 12,
       "U+FDD0"},
      {"unknown alias", Head("parameters: *nope\n"), "", 3, 0, "YAML syntax error"},
      {"alias bomb",
       Head("parameters:\n  a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            "  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
            "  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"),
       "parameters", 0, 0, "the run spec is too large"},
      {"self-referencing alias", Head("parameters:\n  loop: &l [*l]\n"), "parameters.loop", 0, 0,
       "deeper than 64"},
  };
}

TEST_CASE("each bad run spec gives one located InvalidArgument error", "[run_spec]") {
  for (const BadSpec& bad : BadSpecs()) {
    INFO("case: " << bad.label << "\n---\n" << bad.yaml << "---");
    const absl::StatusOr<tessera::v1::RunSpec> spec = ParseRunSpec(bad.yaml);
    REQUIRE_FALSE(spec.ok());
    const std::string message(spec.status().message());
    INFO("message: " << message);
    CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    if (bad.line > 0) {
      const std::string where = bad.column > 0
                                    ? absl::StrCat("line ", bad.line, ", column ", bad.column, ": ")
                                    : absl::StrCat("line ", bad.line, ", column ");
      CHECK(absl::StartsWith(message, where));
    } else {
      CHECK(absl::StartsWith(message, "line "));
    }
    if (!bad.field.empty()) CHECK(absl::StrContains(message, bad.field));
    if (!bad.says.empty()) CHECK(absl::StrContains(message, bad.says));
  }
}

TEST_CASE("the message format matches the documented examples", "[run_spec]") {
  auto message = [](const std::string& yaml) {
    return std::string(ParseRunSpec(yaml).status().message());
  };
  CHECK(message(Head("compute:\n  gpus: -4\n")) ==
        "line 4, column 9: compute.gpus: must be a non-negative integer, got -4");
  CHECK(absl::StartsWith(message(Head("compute:\n  gpu: 8\n")),
                         "line 4, column 3: unknown field \"compute.gpu\" (known: cluster, gpus, "
                         "gpu_type, nodes, node_names, instance, procs_per_node, min_nodes)"));
  CHECK(message("command: x\n") == "line 1, column 1: name: required field is missing or empty");
}

TEST_CASE("inputs over 1 MiB are rejected before parsing", "[run_spec]") {
  std::string yaml = Head("parameters:\n  blob: \"");
  yaml += std::string((1 << 20) + 1, 'x');
  yaml += "\"\n";
  const auto spec = ParseRunSpec(yaml);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(spec.status().message(), "1 MiB"));
}

TEST_CASE("nesting at the limit is accepted", "[run_spec]") {
  // Root (1) > parameters (2) > 62 nested lists, the innermost at depth 64.
  const auto spec = ParseRunSpec(Nested(62));
  INFO(spec.status().ToString());
  CHECK(spec.ok());
  CHECK_FALSE(ParseRunSpec(Nested(63)).ok());
}

TEST_CASE("garbage never throws and always reports a position", "[run_spec]") {
  const std::string inputs[] = {
      std::string("\0\0\0", 3),
      "{",
      "}",
      "[",
      "]]",
      ":",
      "- - -",
      "? ",
      "&a",
      "*a",
      "!!",
      "'unterminated",
      "\"bad \\q escape\"",
      "%YAML 9.9\n---\na: 1",
      "\t\tname: x",
      "name: a\ncommand: x\n\xef\xbb\xbf",
      "a: b: c",
      "@",
      "`",
      "{a: [}]",
      "|\n  x\n y",
      std::string(10000, '['),
      std::string(10000, '{'),
      "- " + std::string(3000, '-'),
  };
  for (const std::string& input : inputs) {
    INFO(input.substr(0, 80));
    absl::StatusOr<tessera::v1::RunSpec> spec;
    REQUIRE_NOTHROW(spec = ParseRunSpec(input));
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StartsWith(spec.status().message(), "line "));
  }
}

}  // namespace run_spec_errors_test
