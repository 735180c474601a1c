// The HTTP API's JSON forms (apps/server/include/laneq/server/json_mapping.hpp): encodings,
// request parsing with named fields, answers, and the status of every error number.
#include "laneq/server/json_mapping.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../unit/support.hpp"
#include "laneq/server/auth.hpp"

namespace laneq::server {
namespace {

namespace json = boost::json;

json::object obj(std::string_view text) {
  auto r = parse_body(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.err().message);
  return r.ok() ? r.value() : json::object{};
}

TEST(json_mapping, base64_round_trips_every_length_and_rejects_garbage) {
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    for (bool url : {false, true}) {
      auto text = base64_encode(bytes, url);
      auto back = base64_decode(text, url);
      ASSERT_TRUE(back.has_value()) << n;
      EXPECT_EQ(*back, bytes) << n;
    }
    bytes += static_cast<char>((n * 37) & 0xFF);
  }
  EXPECT_EQ(base64_encode("hello"), "aGVsbG8=");
  EXPECT_FALSE(base64_decode("aGVsbG8*").has_value());
  EXPECT_FALSE(base64_decode("a").has_value());
  EXPECT_FALSE(base64_decode("aGVsbG9=").has_value());  // non-zero leftover bits
}

TEST(json_mapping, lease_tokens_survive_the_round_trip_losslessly) {
  std::mt19937_64 rng{42};
  for (int i = 0; i < 1000; ++i) {
    lease_token t{group_id{rng()}, message_id{rng()}, static_cast<std::uint32_t>(rng()), rng()};
    auto text = encode_lease(t);
    EXPECT_EQ(text.size(), 38u);
    auto back = decode_lease(text);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(decode_lease("").has_value());
  EXPECT_FALSE(decode_lease(std::string(38, '!')).has_value());
  EXPECT_FALSE(decode_lease(std::string(37, 'A')).has_value());
}

TEST(json_mapping, a_batch_lease_adds_its_size_and_a_single_lease_keeps_its_38_characters) {
  lease_token one{group_id{1}, message_id{2}, 3, 4};
  lease_token batch{group_id{1}, message_id{2}, 3, 4, 7};
  EXPECT_EQ(encode_lease(one).size(), 38u);
  auto text = encode_lease(batch);
  EXPECT_EQ(text.size(), 43u);
  EXPECT_EQ(decode_lease(text), batch);
  EXPECT_EQ(text.substr(0, 37), encode_lease(one).substr(0, 37)) << "the same fields first";
  lease_token big = batch;
  big.batch = 101;  // past limits::ordered_batch_max
  EXPECT_FALSE(decode_lease(encode_lease(big)).has_value());
}

TEST(json_mapping, batch_count_and_from_parse_and_refuse_what_is_out_of_range) {
  auto rr = receive_from_json(obj(R"({"max": 10, "batch": 5})"));
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr.value().batch, 5u);
  EXPECT_EQ(receive_from_json(obj(R"({})")).value().batch, 1u);
  auto big = receive_from_json(obj(R"({"batch": 101})"));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.err().code, errc::invalid_argument);
  EXPECT_NE(big.err().message.find("batch"), std::string::npos) << big.err().message;
  EXPECT_FALSE(receive_from_json(obj(R"({"batch": 0})")).ok());
  auto lease = encode_lease(lease_token{group_id{1}, message_id{2}, 3, 4, 5});
  auto counted = leases_from_json(obj(R"({"lease": ")" + lease + R"(", "count": 2})"), 10);
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ(counted.value().count, 2u);
  EXPECT_FALSE(leases_from_json(obj(R"({"lease": ")" + lease + R"(", "count": 0})"), 10).ok());
  auto many = leases_from_json(obj(R"({"leases": [")" + lease + R"("], "count": 1})"), 10);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.err().message.find("count"), std::string::npos) << many.err().message;
  auto from = nack_from_json(obj(R"({"lease": ")" + lease + R"(", "from": 3})"));
  ASSERT_TRUE(from.ok());
  EXPECT_EQ(from.value().second.from, 3u);
  EXPECT_EQ(nack_from_json(obj(R"({"lease": ")" + lease + R"("})")).value().second.from,
            nack_request::first_unacked);
  EXPECT_FALSE(nack_from_json(obj(R"({"lease": ")" + lease + R"(", "from": -1})")).ok());
}

TEST(json_mapping, ids_are_positive_decimal_strings) {
  EXPECT_EQ(encode_id(message_id{12345}), "12345");
  EXPECT_EQ(decode_id("12345")->value, 12345u);
  EXPECT_FALSE(decode_id("0").has_value());
  EXPECT_FALSE(decode_id("-1").has_value());
  EXPECT_FALSE(decode_id("12a").has_value());
  EXPECT_FALSE(decode_id("99999999999999999999999").has_value());
}

TEST(json_mapping, utf8_validation_rejects_overlongs_surrogates_and_truncation) {
  EXPECT_TRUE(is_utf8("plain ascii"));
  // Long ASCII runs are checked eight bytes at a time: a byte anywhere in a word still counts.
  for (std::size_t at = 0; at < 40; ++at) {
    std::string text(40, 'a');
    text[at] = '\xFF';
    EXPECT_FALSE(is_utf8(text)) << "0xFF at " << at;
    text.replace(at, 1, "\xC3\xBC");
    EXPECT_TRUE(is_utf8(text)) << "a two-byte sequence at " << at;
    text.resize(at + 1);  // cut inside it
    EXPECT_FALSE(is_utf8(text)) << "truncated at " << at;
  }
  EXPECT_TRUE(is_utf8("gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_utf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(is_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_utf8("\xFF"));
}

// Found by fuzz_http_request (corpus/http_request/non_utf8_path_in_error): a path with a byte
// that is not UTF-8 was quoted in the route_not_found message, and the error answer was not JSON.
TEST(json_mapping, an_error_message_quoting_bytes_that_are_not_utf8_stays_valid_json) {
  error e{errc::route_not_found,
          "no endpoint POST /v1/queues/orders/ext\xff"
          "end \xc3"};
  auto body = error_body(e);
  boost::system::error_code ec;
  auto doc = json::parse(body, ec);
  ASSERT_FALSE(ec) << body;
  EXPECT_EQ(doc.at("error").at("message").as_string(),
            "no endpoint POST /v1/queues/orders/ext\\xffend \\xc3");
  // Well-formed UTF-8 passes unchanged, a multi-byte character cut in half does not.
  EXPECT_EQ(utf8_or_escaped("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(utf8_or_escaped("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(utf8_or_escaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

TEST(json_mapping, percent_decoding_names_a_tenant_queue) {
  EXPECT_EQ(*percent_decode("acme%2Forders"), "acme/orders");
  EXPECT_EQ(*percent_decode("a%20b"), "a b");
  EXPECT_FALSE(percent_decode("bad%2").has_value());
  EXPECT_FALSE(percent_decode("bad%zz").has_value());
}

TEST(json_mapping, a_single_message_and_a_batch_parse_with_every_field) {
  auto one = messages_from_json(
      obj(R"({"body": "hi", "headers": {"account": "a1"}, "fairness_key": "t1", "delay_ms": 5})"),
      10);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one.value().size(), 1u);
  EXPECT_EQ(one.value()[0].body, "hi");
  ASSERT_EQ(one.value()[0].headers.size(), 1u);
  EXPECT_EQ(one.value()[0].headers[0].name, "account");
  EXPECT_EQ(one.value()[0].headers[0].value, "a1");
  EXPECT_EQ(one.value()[0].fairness_key, "t1");
  EXPECT_EQ(one.value()[0].delay, std::chrono::milliseconds{5});

  auto batch =
      messages_from_json(obj(R"({"messages": [{"body": "a"}, {"body_base64": "AP8="}]})"), 10);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch.value().size(), 2u);
  EXPECT_EQ(batch.value()[1].body, std::string("\x00\xFF", 2));
}

TEST(json_mapping, message_errors_name_the_field) {
  auto check = [](std::string_view text, errc code, std::string_view names) {
    auto r = messages_from_json(obj(text), 2);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.err().code, code) << text;
    EXPECT_NE(r.err().message.find(names), std::string::npos) << r.err().message;
  };
  check(R"({"body": 5})", errc::invalid_argument, "body");
  check(R"({"bodyy": "x"})", errc::invalid_argument, "bodyy");
  check(R"({"body": "a", "body_base64": "YQ=="})", errc::invalid_argument, "body_base64");
  check(R"({"body_base64": "***"})", errc::invalid_argument, "body_base64");
  check(R"({"headers": {"a": 1}})", errc::invalid_argument, "headers.a");
  check(R"({"delay_ms": -1})", errc::invalid_argument, "delay_ms");
  check(R"({"delay_ms": 1.5})", errc::invalid_argument, "delay_ms");
  check(R"({"messages": [{"body": "a"}, {"body": true}]})", errc::invalid_argument,
        "messages[1].body");
  check(R"({"messages": [{}, {}, {}]})", errc::limit_exceeded, "at most 2");
  check(R"({"messages": []})", errc::invalid_argument, "messages");
}

TEST(json_mapping, malformed_bodies_are_invalid_argument) {
  auto r = parse_body("{\"body\": ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("not valid JSON"), std::string::npos);
  auto arr = parse_body("[1, 2]");
  ASSERT_FALSE(arr.ok());
  EXPECT_NE(arr.err().message.find("must be a JSON object"), std::string::npos);
  EXPECT_TRUE(parse_body("").ok());
  EXPECT_TRUE(parse_body("  \n").ok());
}

TEST(json_mapping, receive_ack_nack_extend_and_redrive_requests_parse_and_check_ranges) {
  auto rr = receive_from_json(obj(R"({"max": 10, "lease_ms": 1500, "wait_ms": 200})"));
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr.value().max, 10u);
  EXPECT_EQ(rr.value().lease_us, 1'500'000);
  EXPECT_EQ(rr.value().wait_us, 200'000);
  EXPECT_FALSE(receive_from_json(obj(R"({"max": 0})")).ok());
  EXPECT_FALSE(receive_from_json(obj(R"({"wait_ms": 20001})")).ok());
  EXPECT_FALSE(receive_from_json(obj(R"({"lease_ms": "1"})")).ok());

  lease_token t{group_id{1}, message_id{2}, 3, 4};
  auto lease = encode_lease(t);
  auto one = leases_from_json(obj(R"({"lease": ")" + lease + R"("})"), 10);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one.value().single);
  EXPECT_EQ(one.value().leases.at(0), t);
  auto many = leases_from_json(obj(R"({"leases": [")" + lease + R"(", ")" + lease + R"("]})"), 10);
  ASSERT_TRUE(many.ok());
  EXPECT_FALSE(many.value().single);
  EXPECT_EQ(many.value().leases.size(), 2u);
  EXPECT_FALSE(leases_from_json(obj(R"({})"), 10).ok());
  EXPECT_FALSE(leases_from_json(obj(R"({"lease": "nope"})"), 10).ok());

  auto nack = nack_from_json(obj(R"({"lease": ")" + lease + R"(", "retry_after_ms": 250})"));
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack.value().second.kind, nack_kind::retry);
  EXPECT_EQ(nack.value().second.retry_after_us, 250'000);
  auto dead = nack_from_json(obj(R"({"lease": ")" + lease + R"(", "dead_letter": true})"));
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead.value().second.kind, nack_kind::dead_letter);
  EXPECT_FALSE(nack_from_json(obj(R"({"lease": ")" + lease +
                                  R"(", "dead_letter": true, "retry_after_ms": 1})"))
                   .ok());

  auto ext = extend_from_json(obj(R"({"lease": ")" + lease + R"(", "lease_ms": 1000})"));
  ASSERT_TRUE(ext.ok());
  EXPECT_EQ(ext.value().second, 1'000'000);
  EXPECT_FALSE(extend_from_json(obj(R"({"lease": ")" + lease + R"("})")).ok());

  auto ids = redrive_from_json(obj(R"({"ids": ["7", "9"]})"), 10);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().size(), 2u);
  EXPECT_TRUE(redrive_from_json(obj("{}"), 10).value().empty());
  EXPECT_FALSE(redrive_from_json(obj(R"({"ids": [7]})"), 10).ok());
}

/// The one message of a `deliveries_json` or `dead_letters_json` answer.
json::object only_message(const std::string& text, std::string_view list) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  EXPECT_FALSE(ec) << ec.message() << " in " << text;
  if (ec) return {};
  const auto& arr = v.as_object().at(list).as_array();
  EXPECT_EQ(arr.size(), 1u);
  return arr.empty() ? json::object{} : arr.front().as_object();
}

delivery sample_delivery() {
  delivery d;
  d.msg.id = message_id{77};
  d.msg.body = "hello";
  d.msg.headers = {{"account", "a1"}};
  d.msg.fairness_key = "t";
  d.msg.enqueued_at = timestamp::from_ms(1234);
  d.msg.attempts = 1;
  d.lease = lease_token{group_id{5}, message_id{77}, 1, 99};
  d.deadline = timestamp::from_ms(31234);
  d.ordering_key = "a1";
  return d;
}

TEST(json_mapping, deliveries_carry_text_or_base64_bodies) {
  auto d = sample_delivery();
  auto o = only_message(deliveries_json({d}), "messages");
  EXPECT_EQ(o.at("id").as_string(), "77");
  EXPECT_EQ(decode_lease(o.at("lease").as_string()).value(), d.lease);
  EXPECT_EQ(o.at("attempt").to_number<std::int64_t>(), 1);
  EXPECT_EQ(o.at("body").as_string(), "hello");
  EXPECT_EQ(o.at("headers").as_object().at("account").as_string(), "a1");
  EXPECT_EQ(o.at("fairness_key").as_string(), "t");
  EXPECT_EQ(o.at("ordering_key").as_string(), "a1");
  EXPECT_EQ(o.at("enqueued_at_ms").to_number<std::int64_t>(), 1234);
  EXPECT_EQ(o.at("lease_deadline_ms").to_number<std::int64_t>(), 31234);
  EXPECT_EQ(o.at("batch_index").to_number<std::int64_t>(), 0);
  EXPECT_EQ(o.size(), 10u);
  d.msg.body = std::string("\xFF\x00", 2);
  auto b = only_message(deliveries_json({d}), "messages");
  EXPECT_FALSE(b.contains("body"));
  EXPECT_EQ(b.at("body_base64").as_string(), "/wA=");
  EXPECT_EQ(deliveries_json({}), R"({"messages":[]})");
}

TEST(json_mapping, dead_letters_carry_their_payload_reason_and_attempts) {
  dead_letter dl{sample_delivery().msg, dead_letter_reason::max_attempts, timestamp::from_ms(99)};
  dl.msg.attempts = 3;
  dl.msg.headers.push_back({"account", "shadowed"});  // the first of one name is shown
  auto o = only_message(dead_letters_json({dl}), "dead_letters");
  EXPECT_EQ(o.at("id").as_string(), "77");
  EXPECT_EQ(o.at("body").as_string(), "hello");
  EXPECT_EQ(o.at("headers").as_object().size(), 1u);
  EXPECT_EQ(o.at("headers").as_object().at("account").as_string(), "a1");
  EXPECT_EQ(o.at("attempts").to_number<std::int64_t>(), 3);
  EXPECT_EQ(o.at("reason").as_string(), to_string(dead_letter_reason::max_attempts));
  EXPECT_EQ(o.at("at_ms").to_number<std::int64_t>(), 99);
  EXPECT_EQ(o.at("enqueued_at_ms").to_number<std::int64_t>(), 1234);
}

/// Random text from bytes JSON must escape, multi-byte UTF-8 and, when `any_bytes`, bytes that
/// are not UTF-8 at all.
std::string random_text(std::mt19937_64& rng, bool any_bytes) {
  static const std::string pieces[] = {
      "\"",   "\\",   "/",    "\b", "\f", "\n", "\r",       "\t",           std::string(1, '\0'),
      "\x01", "\x1f", "\x7f", "a",  "Z",  " ",  "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  std::string out;
  auto n = rng() % 12;
  for (std::size_t i = 0; i < n; ++i) {
    if (any_bytes && rng() % 4 == 0)
      out += static_cast<char>(0x80 + rng() % 0x80);
    else
      out += pieces[rng() % std::size(pieces)];
  }
  return out;
}

TEST(json_mapping, message_answers_are_valid_json_that_reads_back_exactly) {
  auto seed = test::seed_from_env(20261201);
  SCOPED_TRACE(test::rerun_hint(seed, "laneq_server_tests"));
  std::mt19937_64 rng{seed};
  for (int round = 0; round < 500; ++round) {
    std::vector<delivery> ds;
    auto n = 1 + rng() % 4;
    for (std::size_t i = 0; i < n; ++i) {
      auto d = sample_delivery();
      d.msg.id = message_id{rng()};
      d.msg.body = random_text(rng, true);
      d.msg.headers = {{random_text(rng, false) + "h", random_text(rng, false)},
                       {"raw", random_text(rng, true)}};
      d.msg.fairness_key = random_text(rng, false);
      d.ordering_key = random_text(rng, false);
      d.lease.attempt = static_cast<std::uint32_t>(rng());
      d.msg.attempts = static_cast<std::uint32_t>(rng());  // "attempt" is the message's own
      d.batch_index = static_cast<std::uint32_t>(rng() % 100);
      d.msg.enqueued_at = timestamp::from_ms(static_cast<std::int64_t>(rng() >> 24));
      ds.push_back(std::move(d));
    }
    auto text = deliveries_json(ds);
    boost::system::error_code ec;
    auto v = json::parse(text, ec);  // Boost.JSON rejects text that is not UTF-8
    ASSERT_FALSE(ec) << ec.message() << " in " << text;
    const auto& arr = v.as_object().at("messages").as_array();
    ASSERT_EQ(arr.size(), ds.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const auto& o = arr[i].as_object();
      const auto& m = ds[i].msg;
      if (is_utf8(m.body)) {
        EXPECT_EQ(o.at("body").as_string(), m.body);
      } else {
        EXPECT_EQ(base64_decode(o.at("body_base64").as_string()).value(), m.body);
      }
      EXPECT_EQ(o.at("id").as_string(), encode_id(m.id));
      EXPECT_EQ(o.at("attempt").to_number<std::uint32_t>(), m.attempts);
      EXPECT_EQ(o.at("batch_index").to_number<std::uint32_t>(), ds[i].batch_index);
      EXPECT_EQ(o.at("fairness_key").as_string(), m.fairness_key);
      EXPECT_EQ(o.at("ordering_key").as_string(), ds[i].ordering_key);
      EXPECT_EQ(o.at("enqueued_at_ms").to_number<std::int64_t>(), m.enqueued_at.ms());
      const auto& h = o.at("headers").as_object();
      EXPECT_EQ(h.at(m.headers[0].name).as_string(), m.headers[0].value);
      // A value that is not UTF-8 is shown with \xNN for its stray bytes.
      EXPECT_EQ(h.at("raw").as_string(), utf8_or_escaped(m.headers[1].value));
    }
  }
}

TEST(json_mapping, every_error_number_has_a_status_and_a_numbered_body) {
  for (int n = 1; n <= 20; ++n) {
    auto code = static_cast<errc>(static_cast<std::uint8_t>(n));
    auto status = http_status(code);
    EXPECT_TRUE(status >= 400 && status < 600) << n;
    auto body = json::parse(error_body(error{code, "why"})).as_object();
    const auto& e = body.at("error").as_object();
    EXPECT_EQ(e.at("code").as_string(), to_string(code));
    EXPECT_EQ(e.at("number").to_number<std::int64_t>(), n);
    EXPECT_EQ(e.at("message").as_string(), "why");
  }
  EXPECT_EQ(http_status(errc::invalid_argument), 400u);
  EXPECT_EQ(http_status(errc::queue_not_found), 404u);
  EXPECT_EQ(http_status(errc::topic_not_found), 404u);
  EXPECT_EQ(http_status(errc::lease_not_found), 404u);
  EXPECT_EQ(http_status(errc::lease_expired), 404u);
  EXPECT_EQ(http_status(errc::spec_conflict), 409u);
  EXPECT_EQ(http_status(errc::limit_exceeded), 413u);
  EXPECT_EQ(http_status(errc::unauthorized), 401u);
  EXPECT_EQ(http_status(errc::forbidden), 403u);
  EXPECT_EQ(http_status(errc::storage_failed), 503u);
}

TEST(auth, tokens_scope_queue_names_to_their_tenant) {
  authenticator auth{{{"acme-token-0123456789", "acme"}, {"root-token-0123456789", "*"}}};
  EXPECT_EQ(auth.authenticate("").err().code, errc::unauthorized);
  EXPECT_EQ(auth.authenticate("Bearer wrong").err().code, errc::unauthorized);
  EXPECT_EQ(auth.authenticate("Basic acme-token-0123456789").err().code, errc::unauthorized);
  auto acme = auth.authenticate("Bearer acme-token-0123456789");
  ASSERT_TRUE(acme.ok());
  EXPECT_EQ(acme.value().tenant, "acme");
  EXPECT_EQ(auth.resolve(acme.value(), "orders").value(), "acme/orders");
  EXPECT_EQ(auth.resolve(acme.value(), "acme/orders").value(), "acme/orders");
  EXPECT_EQ(auth.resolve(acme.value(), "other/orders").err().code, errc::forbidden);
  auto root = auth.authenticate("bearer root-token-0123456789");
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root.value().admin());
  EXPECT_EQ(auth.resolve(root.value(), "orders").value(), "orders");
  authenticator off{{}};
  EXPECT_TRUE(off.authenticate("").value().admin());
}

}  // namespace
}  // namespace laneq::server
