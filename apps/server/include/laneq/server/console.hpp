// The web console's static files (docs/operations.md, "Console"): apps/server/console/, built
// into laneqd (cmake/embed_console.cmake writes their bytes into a generated .cpp) and served
// under /console/ without a token. The pages call the public HTTP API with the operator's token;
// they are not part of that API (docs/openapi.json and `routes()` leave them out).
#pragma once

#include <span>
#include <string_view>

#include "laneq/server/router.hpp"

namespace laneq::server {

/// One file of the console, as embedded at build time.
struct console_asset {
  std::string_view name;          ///< the file name, one path segment ("app.js")
  std::string_view content_type;  ///< from the file's extension
  std::string_view etag;          ///< a quoted strong entity tag: the start of the bytes' SHA-256
  std::string_view bytes;
};

/// Every file of the console, sorted by name (defined in the generated console_assets.cpp).
std::span<const console_asset> console_assets();

/// Whether the path of `target` (path and query) is the console's: `/console` or below it.
bool console_target(std::string_view target);

/// The answer to `method` on a console `target`: `/console` redirects (308) to `/console/`,
/// `/console/` is index.html, `/console/<name>` an embedded file with its content type, ETag and
/// Cache-Control; any other path below it is 404 `route_not_found` (names are matched exactly
/// against the embedded files, so no path reaches the file system), a method other than GET
/// (HEAD arrives as GET) is 405. Needs no token.
http_response console_response(std::string_view method, std::string_view target);

}  // namespace laneq::server
