#include "transport/metrics/text_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "transport/metrics/registry.h"

namespace tessera::metrics {
namespace {

// Below 2^53 every integer is exact in a double, so printing it as an integer round-trips.
constexpr double kMaxExactInteger = 9007199254740992.0;

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[64];
  std::to_chars_result r;
  if (v == std::trunc(v) && std::fabs(v) < kMaxExactInteger) {
    if (v == 0 && std::signbit(v)) v = 0;  // "-0" reads back fine but is noise
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<std::int64_t>(v));
  } else {
    // The shortest digits that read back exactly; plain decimals for "everyday" magnitudes
    // ("0.0005", "2.5", "123456.7"), an exponent outside them ("1e-05", "1.5e+20"), as Go's
    // strconv 'g' does for Prometheus's own clients.
    r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    const char* e = std::find(buf, r.ptr, 'e');
    int exponent = 0;
    std::from_chars(e + 1 + (e[1] == '+' ? 1 : 0), r.ptr, exponent);
    if (exponent >= -4 && exponent < 15) {
      r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
    }
  }
  out.append(buf, r.ptr);
}

void AppendEscaped(std::string& out, std::string_view s, bool escape_quote) {
  for (const char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '"':
        if (escape_quote) {
          out += "\\\"";
        } else {
          out += c;
        }
        break;
      default:
        out += c;
    }
  }
}

// `{a="x",b="y"}`, with an optional extra `le` pair; nothing at all when there are no labels.
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const std::vector<std::string>& values, const char* le_value = nullptr) {
  if (names.empty() && le_value == nullptr) return;
  out += '{';
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    AppendEscaped(out, values[i], /*escape_quote=*/true);
    out += '"';
  }
  if (le_value != nullptr) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += le_value;
    out += '"';
  }
  out += '}';
}

void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const FamilySnapshot& family, const MetricSnapshot& metric, double value,
                  const char* le_value = nullptr) {
  out += name;
  out += suffix;
  AppendLabels(out, family.label_names, metric.label_values, le_value);
  out += ' ';
  AppendValue(out, value);
  out += '\n';
}

void AppendFamily(std::string& out, const FamilySnapshot& family) {
  if (!family.help.empty()) {
    absl::StrAppend(&out, "# HELP ", family.name, " ");
    AppendEscaped(out, family.help, /*escape_quote=*/false);
    out += '\n';
  }
  absl::StrAppend(&out, "# TYPE ", family.name, " ", MetricTypeName(family.type), "\n");
  for (const MetricSnapshot& m : family.metrics) {
    if (family.type != MetricType::kHistogram) {
      AppendSample(out, family.name, "", family, m, m.value);
      continue;
    }
    for (std::size_t i = 0; i < m.cumulative_counts.size(); ++i) {
      const std::string le = i < family.bucket_bounds.size() ? FormatValue(family.bucket_bounds[i])
                                                             : std::string("+Inf");
      AppendSample(out, family.name, "_bucket", family, m,
                   static_cast<double>(m.cumulative_counts[i]), le.c_str());
    }
    AppendSample(out, family.name, "_sum", family, m, m.sum);
    AppendSample(out, family.name, "_count", family, m, static_cast<double>(m.count));
  }
}

}  // namespace

std::string FormatValue(double v) {
  std::string out;
  AppendValue(out, v);
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  AppendEscaped(out, help, /*escape_quote=*/false);
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  AppendEscaped(out, value, /*escape_quote=*/true);
  return out;
}

std::string RenderText(absl::Span<const FamilySnapshot> families) {
  std::string out;
  for (const FamilySnapshot& family : families) AppendFamily(out, family);
  return out;
}

std::string RenderText(const Registry& registry) { return RenderText(registry.Collect()); }

}  // namespace tessera::metrics
