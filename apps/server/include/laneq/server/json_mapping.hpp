// JSON forms of the HTTP API's requests and answers (docs/api.md): messages in and out, leases as
// opaque strings, stats, groups, dead letters and errors with their HTTP status.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

#include "laneq/actors/protocol.hpp"
#include "laneq/error.hpp"

namespace laneq::server {

// -- encodings ----------------------------------------------------------------------------------

/// Base64 (RFC 4648 §4 with padding), or base64url without padding (§5) when `url`.
std::string base64_encode(std::string_view bytes, bool url = false);
/// Decodes `base64_encode`'s output (padding optional); nullopt on any other character.
std::optional<std::string> base64_decode(std::string_view text, bool url = false);
/// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_utf8(std::string_view text);
/// `text` with every byte that is not part of well-formed UTF-8 written as `\xNN` (four
/// characters), so it can go into a JSON string.
std::string utf8_or_escaped(std::string_view text);

/// A lease token as an opaque string: base64url of its four fields, big-endian (lossless): 38
/// characters, as before ordered batches; a batch's lease adds its size (43 characters).
std::string encode_lease(const lease_token& lease);
std::optional<lease_token> decode_lease(std::string_view text);

/// A message id as a decimal string.
std::string encode_id(message_id id);
std::optional<message_id> decode_id(std::string_view text);
/// A page cursor of `GET .../groups` (docs/api.md "Groups"): the lane id a page ends at, as 32
/// lowercase hex digits. Clients treat it as opaque.
std::string encode_groups_cursor(std::string_view after);
/// The lane id of a cursor, or nullopt when it is not one.
std::optional<std::string> decode_groups_cursor(std::string_view text);

/// Percent-decodes a URL path segment or query value; nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view text);

// -- requests -----------------------------------------------------------------------------------

/// Parses a request body; an empty body is `{}`. Malformed JSON or a non-object is
/// invalid_argument naming the body.
result<boost::json::object> parse_body(std::string_view body);

/// Every field of `obj` must be one of `allowed`; otherwise invalid_argument naming
/// `<path>.<field>`.
status check_fields(const boost::json::object& obj, std::initializer_list<std::string_view> allowed,
                    std::string_view path);

/// An optional integer field within [min, max]; errors name `<path>.<key>`.
result<std::optional<std::int64_t>> get_int(const boost::json::object& obj, std::string_view key,
                                            std::string_view path, std::int64_t min,
                                            std::int64_t max);
/// An optional string field.
result<std::optional<std::string>> get_string(const boost::json::object& obj, std::string_view key,
                                              std::string_view path);
/// An optional boolean field.
result<std::optional<bool>> get_bool(const boost::json::object& obj, std::string_view key,
                                     std::string_view path);

/// `POST .../messages`: one message or `{"messages": [...]}` (at most `batch_max`).
result<std::vector<outgoing_message>> messages_from_json(const boost::json::object& body,
                                                         std::size_t batch_max);

/// `POST .../receive`: `{"max", "lease_ms", "wait_ms", "batch"}`, all optional.
result<receive_request> receive_from_json(const boost::json::object& body);

/// `{"lease": "..."}` or `{"leases": [...]}` (at most `batch_max`); `single` tells which.
/// `{"lease", "count"}`: an ordered batch's first `count` messages (O12).
struct lease_list {
  std::vector<lease_token> leases;
  bool single = true;
  std::optional<std::uint32_t> count;
};
result<lease_list> leases_from_json(const boost::json::object& body, std::size_t batch_max);

/// `POST .../nack`: `{"lease", "retry_after_ms"}` or `{"lease", "dead_letter": true}`; either
/// with `"from"`, the batch_index of an ordered batch's message that failed.
result<std::pair<lease_token, nack_request>> nack_from_json(const boost::json::object& body);

/// `POST .../extend`: `{"lease", "lease_ms"}`.
result<std::pair<lease_token, std::int64_t>> extend_from_json(const boost::json::object& body);

/// `POST .../dead-letters/redrive`: `{"ids": [...]}` or `{}` (all).
result<std::vector<message_id>> redrive_from_json(const boost::json::object& body,
                                                  std::size_t batch_max);

/// The queue a redrive's body names in `to` (redrive into another queue), if any.
result<std::optional<std::string>> redrive_target_from_json(const boost::json::object& body);

/// `DELETE .../dead-letters`: no body (every dead letter) or `{"ids": [...]}` (at least one, at
/// most limits::dead_letter_delete_max).
result<std::vector<message_id>> dead_letter_ids_from_json(const boost::json::object& body);

/// `POST .../purge`: `{}` or no body (the whole queue), or `{"group": "<ordering key>"}`.
result<group_filter> purge_from_json(const boost::json::object& body);

/// `POST /v1/admin/checkpoint`: `{"dir": "/abs/path"}`; a relative path, an empty one, one
/// with a NUL byte or longer than limits::checkpoint_dir_bytes_max is invalid_argument.
result<std::string> checkpoint_dir_from_json(const boost::json::object& body);

// -- answers ------------------------------------------------------------------------------------

/// A receive's answer, `{"messages": [...]}`, each `{"id", "lease", "batch_index", "attempt",
/// "body" | "body_base64", "headers", "fairness_key", "ordering_key", "enqueued_at_ms",
/// "lease_deadline_ms"}`. Written as text directly (no JSON tree), as is the next one.
std::string deliveries_json(const std::vector<delivery>& ds);
/// A peek's answer, `{"messages": [...]}`, each `{"id", "body" | "body_base64", "headers",
/// "fairness_key", "ordering_key", "attempts", "enqueued_at_ms", "not_before_ms", "in_flight"}`
/// and, in flight, `"lease_deadline_ms"`.
std::string peeked_json(const std::vector<peeked_message>& ms);
/// `{"dead_letters": [...]}`, each `{"id", "body" | "body_base64", "headers", "fairness_key",
/// "attempts", "reason", "at_ms", "enqueued_at_ms"}`.
std::string dead_letters_json(const std::vector<dead_letter>& ds);
boost::json::object to_json(const queue_stats& s);
/// `{"key", "backlog", "state", "since_ms", "until_ms", "head"}`.
boost::json::object to_json(const group_info& g);
/// `{"dir", "bytes", "files", "ms"}`.
boost::json::object to_json(const checkpoint_info& c);

/// The HTTP status of an error (400 bad input, 404 unknown queue or lease, 409 conflict, 413 too
/// large, 503 storage degraded or unavailable).
unsigned http_status(errc code);
/// `{"error": {"code", "number", "message"}}`.
std::string error_body(const error& e);

}  // namespace laneq::server
