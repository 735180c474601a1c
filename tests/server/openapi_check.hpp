// Reading docs/openapi.json for tests/server/openapi_test.cpp: its operations, `$ref`s, examples,
// and a check of a JSON value against one of its schemas (the subset of JSON Schema it uses).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

namespace laneq::server::test::openapi {

namespace json = boost::json;

/// docs/openapi.json, parsed once (the path comes from the build: LANEQ_SOURCE_DIR).
const json::object& document();

/// One operation: a method of a path.
struct operation {
  std::string method;  ///< upper case, as the router's table has it ("GET")
  std::string path;    ///< the path template ("/v1/queues/{name}")
  const json::object* path_item = nullptr;
  const json::object* op = nullptr;

  /// `METHOD path`, for messages.
  std::string name() const { return method + " " + path; }
};

/// Every operation of `doc`, in the document's order.
std::vector<operation> operations(const json::object& doc);

/// What the `$ref` of `v` points to (`#/components/...`, followed until there is none), or `v`.
const json::value& deref(const json::object& doc, const json::value& v);

/// The operation's path with each path parameter replaced by its documented example, and every
/// query parameter set to its example (none needs percent-encoding).
std::string example_target(const json::object& doc, const operation& o);

/// A request or response body's examples (`example`, or each value of `examples`), with names.
struct named_example {
  std::string name;
  const json::value* value = nullptr;
};
std::vector<named_example> examples_of(const json::object& doc, const json::object& content);

/// The `application/json` content of a request body or response, or nullptr.
const json::object* json_content(const json::object& doc, const json::value& body_or_response);

/// Why `v` does not conform to `schema`, or "" when it does. `at` names `v` in the messages.
/// Checks `$ref`, `type`, `enum`, `required`, `properties`, `additionalProperties`, `items`,
/// `minItems`, `maxItems`, `minimum`, `maximum`, `minLength`, `maxLength`, `pattern` and `oneOf`.
std::string violation(const json::object& doc, const json::value& v, const json::value& schema,
                      const std::string& at);

}  // namespace laneq::server::test::openapi
