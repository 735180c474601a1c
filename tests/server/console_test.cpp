// The web console's static files (apps/server/include/laneq/server/console.hpp,
// docs/operations.md "Console") over a real listener: served without a token with their content
// type, ETag and Cache-Control; /console redirects to /console/; unknown names and every form of
// directory traversal are 404; other methods 405; and the pages load only embedded files.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "laneq/server/console.hpp"
#include "server_test_support.hpp"

namespace laneq::server::test {
namespace {

const std::string token = "console-test-token-000001";

class console_files : public ::testing::Test {
 protected:
  // With tokens configured: the console needs none, the API it calls does.
  in_process_server srv_{http_limits{}, {token_config{token, "*"}}};
  std::uint16_t port() const { return srv_.port(); }
};

const console_asset& asset(std::string_view name) {
  for (const auto& a : console_assets())
    if (a.name == name) return a;
  throw std::runtime_error{"no console asset " + std::string{name}};
}

TEST_F(console_files, the_index_is_served_without_a_token_as_html) {
  for (const std::string target : {"/console/", "/console/?v=1", "/console/index.html"}) {
    auto r = get(port(), target);
    ASSERT_EQ(r.status, 200u) << target << ": " << r.body;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << target;
    EXPECT_EQ(r.body, asset("index.html").bytes) << target;
    EXPECT_EQ(r.header("ETag"), asset("index.html").etag) << target;
    EXPECT_EQ(r.header("Cache-Control"), "no-cache") << target;
    EXPECT_NE(r.header("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
    EXPECT_EQ(r.header("X-Content-Type-Options"), "nosniff");
  }
  // The API behind it still wants the token.
  EXPECT_EQ(get(port(), "/v1/queues").status, 401u);
  EXPECT_EQ(get(port(), "/v1/queues", token).status, 200u);
}

TEST_F(console_files, every_embedded_file_is_served_with_the_content_type_of_its_extension) {
  ASSERT_GE(console_assets().size(), 3u);
  std::set<std::string> etags;
  for (const auto& a : console_assets()) {
    auto name = std::string{a.name};
    auto r = get(port(), "/console/" + name);
    ASSERT_EQ(r.status, 200u) << name;
    EXPECT_EQ(r.body, a.bytes) << name;
    EXPECT_FALSE(r.body.empty()) << name;
    EXPECT_EQ(r.header("ETag"), a.etag) << name;
    etags.insert(std::string{a.etag});
    auto ext = name.substr(name.rfind('.') + 1);
    const auto* expected = ext == "html"  ? "text/html; charset=utf-8"
                           : ext == "js"  ? "text/javascript; charset=utf-8"
                           : ext == "css" ? "text/css; charset=utf-8"
                                          : "image/svg+xml";
    EXPECT_EQ(r.content_type, expected) << name;
  }
  EXPECT_EQ(etags.size(), console_assets().size()) << "each file has its own ETag";
}

TEST_F(console_files, the_bare_path_redirects_to_the_one_with_a_slash) {
  for (const std::string target : {"/console", "/console?x=1"}) {
    auto r = get(port(), target);
    EXPECT_EQ(r.status, 308u) << target;
    EXPECT_EQ(r.header("Location"), "/console/") << target;
  }
}

TEST_F(console_files, unknown_names_and_directory_traversal_are_404) {
  for (const std::string target :
       {"/console/nope.js", "/console/../v1/queues", "/console/%2e%2e/v1/queues",
        "/console/..%2fv1%2fqueues", "/console/./index.html", "/console//index.html",
        "/console/index.html/", "/console/sub/index.html", "/console/INDEX.HTML",
        "/console/index.html%00", "/console/..", "/console/%2e%2e", "/console/.",
        "/console/../../etc/passwd", "/console/app.js/..", "/console/\\..\\index.html"}) {
    auto r = get(port(), target);
    EXPECT_EQ(r.status, 404u) << target << ": " << r.body;
    EXPECT_EQ(r.code(), "route_not_found") << target;
  }
  // A path that only starts like the console's is the API's.
  auto api = get(port(), "/consoles");
  EXPECT_EQ(api.status, 404u);
  EXPECT_NE(api.message().find("no endpoint GET /consoles"), std::string::npos) << api.body;
  EXPECT_FALSE(console_target("/consoles"));
  EXPECT_FALSE(console_target("/v1/queues/console"));
  EXPECT_TRUE(console_target("/console?x"));
}

TEST_F(console_files, other_methods_are_405_and_head_is_get_without_the_body) {
  for (auto verb : {http::verb::post, http::verb::put, http::verb::delete_}) {
    client c{port()};
    auto r = c.call(verb, "/console/", verb == http::verb::delete_ ? "" : "{}");
    EXPECT_EQ(r.status, 405u) << http::to_string(verb);
    EXPECT_EQ(r.header("Allow"), "GET, HEAD");
  }
  client c{port()};
  c.send_raw("HEAD /console/app.js HTTP/1.1\r\nHost: x\r\n\r\n");
  beast::flat_buffer buf;
  http::response_parser<http::empty_body> head;
  head.skip(true);  // a HEAD answer has no body whatever its Content-Length
  http::read(c.stream(), buf, head);
  EXPECT_EQ(head.get().result_int(), 200u);
  EXPECT_EQ(head.get()[http::field::content_length], std::to_string(asset("app.js").bytes.size()));
  EXPECT_EQ(head.get()[http::field::content_type], "text/javascript; charset=utf-8");
  // The connection stays usable after the HEAD.
  c.send_raw("GET /console/console.css HTTP/1.1\r\nHost: x\r\n\r\n");
  http::response<http::string_body> css;
  http::read(c.stream(), buf, css);
  EXPECT_EQ(css.result_int(), 200u);
  EXPECT_EQ(css.body(), asset("console.css").bytes);
}

/// Every file a page or a module names by `pattern`'s first group, outside `ignore`.
std::vector<std::string> references(const std::string& text, const std::regex& pattern) {
  std::vector<std::string> out;
  for (std::sregex_iterator it{text.begin(), text.end(), pattern}, end; it != end; ++it)
    out.push_back((*it)[1].str());
  return out;
}

TEST(console_assets_table, the_pages_load_only_embedded_files_and_nothing_from_elsewhere) {
  std::set<std::string> names;
  for (const auto& a : console_assets()) names.insert(std::string{a.name});
  ASSERT_TRUE(names.contains("index.html"));
  const std::regex attr{R"re((?:src|href)="([^"#]*)")re"};
  const std::regex import{R"re(from '\./([^']+)')re"};
  std::size_t seen = 0;
  for (const auto& a : console_assets()) {
    auto text = std::string{a.bytes};
    for (const auto& ref : references(text, a.name.ends_with(".html") ? attr : import)) {
      if (ref.empty() || ref.starts_with("data:")) continue;
      ++seen;
      EXPECT_TRUE(names.contains(ref)) << a.name << " loads " << ref << ", which is not embedded";
    }
    // No CDN, no fetch from anywhere but this server.
    for (const auto* remote : {"src=\"http", "href=\"http", "src=\"//", "href=\"//", "url(http",
                               "from 'http", "fetch('http", "fetch(`http"})
      EXPECT_EQ(text.find(remote), std::string::npos) << a.name << " reaches out: " << remote;
  }
  EXPECT_GE(seen, 3u) << "index.html's stylesheet and script, and the modules' imports";
}

}  // namespace
}  // namespace laneq::server::test
