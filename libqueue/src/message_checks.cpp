// The checks of an enqueued message (libqueue/include/laneq/message_checks.hpp).
#include "laneq/message_checks.hpp"

#include "laneq/header_name.hpp"
#include "laneq/limits.hpp"

namespace laneq {

namespace {

error limit(const std::string& what) {
  return error{errc::limit_exceeded, what};
}

}  // namespace

std::string message_field(std::size_t i, const char* name) {
  std::string out = "messages[" + std::to_string(i) + "]";
  if (*name != '\0') out += std::string{"."} + name;
  return out;
}

std::string printable(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= ' ' && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::optional<error> check_message(const outgoing_message& m, std::size_t i) {
  // An empty body is almost always a client bug (a field name misspelt, a file not read); a
  // message that carries only headers still needs a body, if only "{}" (docs/api.md, "Enqueue").
  if (m.body.empty())
    return error{errc::invalid_argument, message_field(i, "body") +
                                             " is empty: a message needs a body of 1 to " +
                                             std::to_string(limits::body_bytes_max) + " bytes"};
  if (m.body.size() > limits::body_bytes_max)
    return limit(message_field(i, "body") + " is " + std::to_string(m.body.size()) +
                 " bytes, at most " + std::to_string(limits::body_bytes_max) + " allowed");
  if (m.headers.size() > limits::headers_max)
    return limit(message_field(i, "headers") + " has " + std::to_string(m.headers.size()) +
                 " entries, at most " + std::to_string(limits::headers_max) + " allowed");
  for (const auto& h : m.headers) {
    if (h.name.empty())
      return error{errc::invalid_argument,
                   message_field(i, "headers") + " has an empty header name"};
    if (!is_header_name(h.name))
      return error{errc::invalid_argument,
                   message_field(i, "headers") + " name '" + printable(h.name.substr(0, 64)) +
                       "' is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"};
    if (h.name.size() > limits::header_name_bytes_max ||
        h.value.size() > limits::header_value_bytes_max)
      return limit(message_field(i, "headers") + " '" + h.name.substr(0, 64) +
                   "' is too long (name at most " + std::to_string(limits::header_name_bytes_max) +
                   " bytes, value at most " + std::to_string(limits::header_value_bytes_max) + ")");
  }
  if (m.fairness_key.size() > limits::fairness_key_bytes_max)
    return limit(message_field(i, "fairness_key") + " is longer than " +
                 std::to_string(limits::fairness_key_bytes_max) + " bytes");
  if (m.delay < duration{0} || m.delay > limits::delay_max)
    return error{errc::invalid_argument, message_field(i, "delay_ms") + " must be between 0 and " +
                                             std::to_string(limits::delay_max.count() / 1000)};
  return std::nullopt;
}

std::optional<error> check_receive(std::uint32_t max, std::int64_t lease_us, std::int64_t wait_us,
                                   duration lease_default, std::uint32_t batch) {
  if (max < 1 || max > limits::receive_batch_max)
    return error{errc::invalid_argument,
                 "receive: max must be between 1 and " + std::to_string(limits::receive_batch_max)};
  auto lease = lease_us == 0 ? lease_default : duration{lease_us};
  if (lease < limits::lease_min || lease > limits::lease_max)
    return error{errc::invalid_argument, "receive: lease_ms must be between " +
                                             std::to_string(limits::lease_min.count() / 1000) +
                                             " and " +
                                             std::to_string(limits::lease_max.count() / 1000)};
  if (wait_us < 0 || duration{wait_us} > limits::receive_wait_max)
    return error{errc::invalid_argument,
                 "receive: wait_ms must be between 0 and " +
                     std::to_string(limits::receive_wait_max.count() / 1000)};
  if (batch < 1 || batch > limits::ordered_batch_max)
    return error{errc::invalid_argument, "receive: batch must be between 1 and " +
                                             std::to_string(limits::ordered_batch_max)};
  return std::nullopt;
}

std::optional<error> check_batch(const std::vector<outgoing_message>& batch) {
  if (batch.empty() || batch.size() > limits::enqueue_batch_max)
    return error{errc::invalid_argument, "enqueue: a batch holds 1 to " +
                                             std::to_string(limits::enqueue_batch_max) +
                                             " messages, got " + std::to_string(batch.size())};
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (auto err = check_message(batch[i], i)) return err;
  return std::nullopt;
}

}  // namespace laneq
