// The protocol's transport forms on CAF's binary serializers
// (actors/include/laneq/actors/wire.hpp): deliveries, messages to enqueue and lease tokens cross as
// their codec transport forms, also inside a type-erased CAF message as the middleman sends it, and
// a form of another release is refused with an error rather than misread.
#include "laneq/actors/wire.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

#include "laneq/actors/broker.hpp"
#include "laneq/actors/protocol.hpp"
#include "laneq/codec.hpp"

namespace laneq {
namespace {

struct wire_system {
  wire_system() : sys{configured(cfg)} {}
  static caf::actor_system_config& configured(caf::actor_system_config& c) {
    add_message_types(c);
    c.set("scheduler.max-threads", 1);
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

delivery sample_delivery(std::uint64_t n) {
  delivery d;
  d.msg.id = message_id{n};
  d.msg.seq = message_seq{n + 100};
  d.msg.body = std::string(300, static_cast<char>('a' + n));
  d.msg.headers = {{"account", "acct-" + std::to_string(n)}, {"x-trace", "t"}};
  d.msg.fairness_key = "tenant-" + std::to_string(n);
  d.msg.attributes = {{"region", "eu"}};
  d.msg.enqueued_at = timestamp{1'000'000};
  d.msg.not_before = timestamp{2'000'000};
  d.msg.attempts = 2;
  d.msg.redriven_after_s = 5;
  d.lease = lease_token{group_id{7}, d.msg.id, 2, 0xfeedface12345678, 1};
  d.deadline = timestamp{3'000'000};
  d.ordering_key = "acct-" + std::to_string(n);
  d.batch_index = static_cast<std::uint32_t>(n);
  return d;
}

std::string bytes_of(const std::vector<char>& buf) {
  return std::string{buf.begin(), buf.end()};
}

void expect_same(const std::vector<delivery>& a, const std::vector<delivery>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].msg, b[i].msg);
    EXPECT_EQ(a[i].lease, b[i].lease);
    EXPECT_EQ(a[i].deadline, b[i].deadline);
    EXPECT_EQ(a[i].ordering_key, b[i].ordering_key);
    EXPECT_EQ(a[i].batch_index, b[i].batch_index);
  }
}

TEST(wire, deliveries_cross_as_their_transport_forms_and_come_back_whole) {
  wire_system w;
  std::vector<delivery> sent{sample_delivery(1), sample_delivery(2)};
  std::vector<char> buf;
  caf::binary_serializer out{w.sys, buf};
  ASSERT_FALSE(out(sent));
  // Each delivery's transport form lies whole in the bytes: the overload, not the field-wise
  // template, serialized it.
  auto bytes = bytes_of(buf);
  for (const auto& d : sent) EXPECT_NE(bytes.find(codec::encode_transport(d)), std::string::npos);

  std::vector<delivery> back;
  caf::binary_deserializer in{w.sys, buf};
  ASSERT_FALSE(in(back));
  expect_same(back, sent);
}

TEST(wire, a_type_erased_message_carries_the_transport_forms) {
  // As the middleman sends a request or a reply: a caf::message of registered types.
  wire_system w;
  std::vector<outgoing_message> batch{{"body-1", {{"account", "a1"}}, "t1", duration{5}},
                                      {"body-2", {}, "", duration{0}}};
  std::vector<lease_token> leases{{group_id{1}, message_id{2}, 3, 4, 1},
                                  {group_id{0}, message_id{9}, 1, 0xabcdef, 1}};
  std::vector<delivery> deliveries{sample_delivery(3)};
  auto msg = caf::make_message(batch, leases, deliveries);
  std::vector<char> buf;
  caf::binary_serializer out{w.sys, buf};
  ASSERT_FALSE(out(msg));
  auto bytes = bytes_of(buf);
  for (const auto& m : batch) EXPECT_NE(bytes.find(codec::encode_transport(m)), std::string::npos);
  std::string token(codec::lease_transport_bytes, '\0');
  codec::encode_transport(leases[1], token.data());
  EXPECT_NE(bytes.find(token), std::string::npos);

  caf::message back;
  caf::binary_deserializer in{w.sys, buf};
  ASSERT_FALSE(in(back));
  ASSERT_TRUE((back.match_elements<std::vector<outgoing_message>, std::vector<lease_token>,
                                   std::vector<delivery>>()));
  EXPECT_EQ(back.get_as<std::vector<outgoing_message>>(0), batch);
  EXPECT_EQ(back.get_as<std::vector<lease_token>>(1), leases);
  expect_same(back.get_as<std::vector<delivery>>(2), deliveries);
}

TEST(wire, a_form_of_another_release_fails_the_deserializer_with_the_reason) {
  wire_system w;
  auto form = codec::encode_transport(sample_delivery(4));
  form[0] = static_cast<char>(codec::transport_format_version + 1);
  std::vector<char> buf;
  caf::binary_serializer out{w.sys, buf};
  ASSERT_FALSE(out(form));  // the string a delivery is sent as, with another version byte
  delivery back;
  caf::binary_deserializer in{w.sys, buf};
  auto err = in(back);
  ASSERT_TRUE(err);
  auto reason = from_caf(err);
  EXPECT_EQ(reason.code, errc::invalid_argument);
  EXPECT_NE(reason.message.find("same release"), std::string::npos) << reason.message;
}

}  // namespace
}  // namespace laneq
