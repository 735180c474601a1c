// The web console's static files under /console/ (apps/server/include/laneq/server/console.hpp).
#include "laneq/server/console.hpp"

#include <algorithm>
#include <string>

#include "laneq/error.hpp"

namespace laneq::server {

namespace {

constexpr std::string_view prefix = "/console";

/// The headers every console answer carries: the pages load only their own files and talk only
/// to this server (no CDN, no inline script), and may not be framed.
void add_security_headers(http_response& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self'; "
                         "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                         "base-uri 'none'; form-action 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

http_response console_error(unsigned status, std::string message) {
  auto r = error_response(error{errc::route_not_found, std::move(message)});
  r.status = status;
  add_security_headers(r);
  return r;
}

const console_asset* find_asset(std::string_view name) {
  auto assets = console_assets();
  auto it = std::find_if(assets.begin(), assets.end(),
                         [name](const console_asset& a) { return a.name == name; });
  return it == assets.end() ? nullptr : &*it;
}

}  // namespace

bool console_target(std::string_view target) {
  auto path = target.substr(0, target.find('?'));
  return path == prefix || path.starts_with("/console/");
}

http_response console_response(std::string_view method, std::string_view target) {
  auto path = target.substr(0, target.find('?'));
  auto shown = std::string{path.substr(0, 200)};
  if (method != "GET") {
    auto r = console_error(
        405, std::string{method.substr(0, 16)} + " is not allowed here (allowed: GET, HEAD)");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (path == prefix) {
    http_response r;
    r.status = 308;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "the console is at /console/\n";
    r.headers.emplace_back("Location", "/console/");
    add_security_headers(r);
    return r;
  }
  auto name = path.substr(prefix.size() + 1);  // after "/console/"
  if (name.empty()) name = "index.html";
  // One segment naming an embedded file exactly: "..", "%2e%2e", "a/b" and "x/" name none.
  const auto* asset = name.find('/') == std::string_view::npos ? find_asset(name) : nullptr;
  if (asset == nullptr) return console_error(404, "the console has no file " + shown);
  http_response r;
  r.content_type = std::string{asset->content_type};
  r.body = std::string{asset->bytes};
  r.headers.emplace_back("ETag", std::string{asset->etag});
  // The files change with laneqd: the browser checks each time (they are a few KiB).
  r.headers.emplace_back("Cache-Control", "no-cache");
  add_security_headers(r);
  return r;
}

}  // namespace laneq::server
