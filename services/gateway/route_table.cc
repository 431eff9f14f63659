#include "services/gateway/route_table.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace tessera::gateway {
namespace {

bool IsParamSegment(std::string_view s) {
  return s.size() > 2 && s.front() == '{' && s.back() == '}';
}

std::string_view ParamName(std::string_view s) { return s.substr(1, s.size() - 2); }

// Whether `path` fits `route`'s template; fills the raw parameter values.
bool Matches(const std::vector<std::string_view>& tmpl, const std::vector<std::string_view>& path,
             std::map<std::string, std::string>* params) {
  if (tmpl.size() != path.size()) return false;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (IsParamSegment(tmpl[i])) {
      if (path[i].empty()) return false;
      if (params != nullptr) (*params)[std::string(ParamName(tmpl[i]))] = std::string(path[i]);
    } else if (tmpl[i] != path[i]) {
      return false;
    }
  }
  return true;
}

// True when `a` is more specific than `b`: at the first segment where one is literal and the
// other a parameter, the literal one wins.
bool MoreSpecific(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const bool pa = IsParamSegment(a[i]), pb = IsParamSegment(b[i]);
    if (pa != pb) return !pa;
  }
  return false;
}

}  // namespace

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path == "/") return out;
  if (path.front() == '/') path.remove_prefix(1);
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(path.substr(start));
      return out;
    }
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

void RouteTable::Add(Route route) {
  auto fail = [&](const std::string& why) {
    if (status_.ok()) {
      status_ = absl::InternalError(
          absl::StrCat("route table: ", route.method, " ", route.path, ": ", why));
    }
  };
  if (route.path.empty() || route.path.front() != '/') return fail("the path must start with /");
  if (!route.handler) return fail("no handler");
  std::set<std::string> declared;
  for (const ParamSpec& p : route.params) {
    if (p.in == ParamIn::kPath) declared.insert(p.name);
  }
  std::set<std::string> in_template;
  for (std::string_view seg : SplitPath(route.path)) {
    if (seg.empty()) return fail("empty path segment");
    if (seg.find_first_of("{}") != std::string_view::npos) {
      if (!IsParamSegment(seg)) return fail(absl::StrCat("malformed segment ", std::string(seg)));
      const std::string name(ParamName(seg));
      if (!declared.count(name)) return fail(absl::StrCat("path parameter ", name, " undeclared"));
      if (!in_template.insert(name).second) return fail(absl::StrCat("duplicate ", name));
    }
  }
  if (in_template != declared) return fail("a declared path parameter is not in the path");
  for (const Route& r : routes_) {
    if (r.method == route.method && r.path == route.path) return fail("defined twice");
    if (r.operation_id == route.operation_id) {
      return fail(absl::StrCat("operation id ", route.operation_id, " used twice"));
    }
  }
  routes_.push_back(std::move(route));
}

RouteTable::Match RouteTable::Find(std::string_view method, std::string_view path) const {
  Match match;
  const std::vector<std::string_view> segments = SplitPath(path);
  if (path.empty() || path.front() != '/') return match;
  std::vector<std::string_view> best_template;
  std::set<std::string> allowed;
  for (const Route& r : routes_) {
    const std::vector<std::string_view> tmpl = SplitPath(r.path);
    if (!Matches(tmpl, segments, nullptr)) continue;
    allowed.insert(r.method);
    if (r.method != method) continue;
    if (match.route == nullptr || MoreSpecific(tmpl, best_template)) {
      match.route = &r;
      best_template = tmpl;
    }
  }
  if (match.route != nullptr) {
    Matches(best_template, segments, &match.path_params);
  } else {
    match.allowed.assign(allowed.begin(), allowed.end());
  }
  return match;
}

}  // namespace tessera::gateway
