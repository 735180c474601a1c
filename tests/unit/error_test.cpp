// Unit tests for the error catalog and result<T> (STYLE.md "Errors, assertions, limits").
#include "laneq/error.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace laneq {
namespace {

constexpr int errc_first = 1;
constexpr int errc_last = 22;

errc errc_from(int n) {
  return static_cast<errc>(static_cast<std::uint8_t>(n));
}

TEST(error, every_code_has_a_distinct_known_name_and_meaning) {
  std::set<std::string_view> names;
  std::set<std::string_view> meanings;
  for (int n = errc_first; n <= errc_last; ++n) {
    auto code = errc_from(n);
    auto name = to_string(code);
    auto meaning = describe(code);
    EXPECT_FALSE(name.empty()) << n;
    EXPECT_EQ(name.find("unknown"), std::string_view::npos) << n << ": " << name;
    EXPECT_FALSE(meaning.empty()) << n;
    EXPECT_EQ(meaning.find("unknown"), std::string_view::npos) << n << ": " << meaning;
    names.insert(name);
    meanings.insert(meaning);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(errc_last - errc_first + 1));
  EXPECT_EQ(meanings.size(), static_cast<std::size_t>(errc_last - errc_first + 1));
}

TEST(error, numbers_outside_the_catalog_are_unknown) {
  EXPECT_EQ(to_string(errc_from(0)), "unknown_error");
  EXPECT_EQ(to_string(errc_from(errc_last + 1)), "unknown_error");
  EXPECT_EQ(describe(errc_from(errc_last + 1)), "unknown error");
}

TEST(error, numbers_and_names_are_stable) {
  EXPECT_EQ(static_cast<int>(errc::invalid_spec), 1);
  EXPECT_EQ(static_cast<int>(errc::ordering_key_missing), 4);
  EXPECT_EQ(static_cast<int>(errc::lease_not_found), 6);
  EXPECT_EQ(static_cast<int>(errc::lease_expired), 7);
  EXPECT_EQ(static_cast<int>(errc::unavailable), 13);
  EXPECT_EQ(static_cast<int>(errc::corrupt_record), 14);
  EXPECT_EQ(static_cast<int>(errc::unauthorized), 15);
  EXPECT_EQ(static_cast<int>(errc::forbidden), 16);
  EXPECT_EQ(static_cast<int>(errc::route_not_found), 17);
  EXPECT_EQ(static_cast<int>(errc::already_exists), 18);
  EXPECT_EQ(static_cast<int>(errc::checkpoint_failed), 19);
  EXPECT_EQ(static_cast<int>(errc::topic_not_found), 20);
  EXPECT_EQ(to_string(errc::topic_not_found), "topic_not_found");
  EXPECT_EQ(static_cast<int>(errc::queue_full), 21);
  EXPECT_EQ(to_string(errc::queue_full), "queue_full");
  EXPECT_EQ(static_cast<int>(errc::queue_not_empty), 22);
  EXPECT_EQ(to_string(errc::queue_not_empty), "queue_not_empty");
  EXPECT_EQ(to_string(errc::invalid_spec), "invalid_spec");
  EXPECT_EQ(to_string(errc::spec_conflict), "spec_conflict");
  EXPECT_EQ(to_string(errc::queue_not_found), "queue_not_found");
  EXPECT_EQ(to_string(errc::ordering_key_missing), "ordering_key_missing");
  EXPECT_EQ(to_string(errc::enqueue_rejected), "enqueue_rejected");
  EXPECT_EQ(to_string(errc::lease_not_found), "lease_not_found");
  EXPECT_EQ(to_string(errc::lease_expired), "lease_expired");
  EXPECT_EQ(to_string(errc::invalid_argument), "invalid_argument");
  EXPECT_EQ(to_string(errc::limit_exceeded), "limit_exceeded");
  EXPECT_EQ(to_string(errc::dead_letter_not_found), "dead_letter_not_found");
  EXPECT_EQ(to_string(errc::queue_deleted), "queue_deleted");
  EXPECT_EQ(to_string(errc::storage_failed), "storage_failed");
  EXPECT_EQ(to_string(errc::unavailable), "unavailable");
}

TEST(error, renders_as_name_number_and_message) {
  EXPECT_EQ(to_string(error{errc::lease_expired, "lease 1.2.1.0 expired"}),
            "lease_expired (7): lease 1.2.1.0 expired");
  EXPECT_EQ(to_string(error{errc::unavailable, ""}), "unavailable (13): ");
  EXPECT_EQ(to_string(error{}), "invalid_argument (8): ");
}

TEST(error, compares_code_and_message) {
  EXPECT_EQ((error{errc::queue_not_found, "q"}), (error{errc::queue_not_found, "q"}));
  EXPECT_NE((error{errc::queue_not_found, "q"}), (error{errc::queue_deleted, "q"}));
  EXPECT_NE((error{errc::queue_not_found, "q"}), (error{errc::queue_not_found, "r"}));
}

TEST(result, holds_a_value) {
  result<int> r = 42;
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 42);
  r.value() = 43;
  EXPECT_EQ(r.value(), 43);
}

TEST(result, holds_an_error) {
  result<int> r = error{errc::queue_not_found, "queue 'q'"};
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.err().code, errc::queue_not_found);
  EXPECT_EQ(r.err().message, "queue 'q'");
}

TEST(result, moves_a_move_only_value_out) {
  result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  auto p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

TEST(result, status_is_ok_or_an_error) {
  status good = ok_t{};
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(good.value(), ok_t{});
  status bad = error{errc::storage_failed, "disk full"};
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.err().code, errc::storage_failed);
}

TEST(result, reading_the_wrong_alternative_stops_the_process) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  result<int> with_error = error{errc::limit_exceeded, "too many"};
  EXPECT_DEATH((void)with_error.value(), "INVARIANT VIOLATED.*result::value\\(\\) on an error");
  result<int> with_value = 1;
  EXPECT_DEATH((void)with_value.err(), "INVARIANT VIOLATED.*result::err\\(\\) on a value");
}

}  // namespace
}  // namespace laneq
