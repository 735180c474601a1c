// The simulation's coverage minimums (coverage.hpp): a run that misses one names the episode
// class and the event, and a run that meets every minimum passes.
#include <gtest/gtest.h>

#include "coverage.hpp"

namespace laneq::sim {
namespace {

/// A run of `episodes` episodes per class that reached `per_episode` of every event.
run_coverage run_with(std::uint64_t episodes, std::uint64_t per_episode) {
  run_coverage rc;
  for (auto& c : rc.by_class) {
    for (auto& n : c.n) n = episodes * per_episode;
    c.n[static_cast<std::size_t>(event::episodes)] = episodes;
  }
  return rc;
}

TEST(SimCoverage, a_run_that_reaches_every_minimum_passes) {
  EXPECT_TRUE(unmet(run_with(10, 20)).empty());
}

TEST(SimCoverage, a_missed_minimum_names_its_class_and_event) {
  auto rc = run_with(10, 20);
  rc.of(episode_class::durable_throttled).n[static_cast<std::size_t>(event::redrives)] = 3;
  rc.of(episode_class::fast).n[static_cast<std::size_t>(event::reclaims)] = 0;
  auto missed = unmet(rc);
  ASSERT_EQ(missed.size(), 2u);
  EXPECT_EQ(missed[0],
            "class fast: 0 reclaims by an old token (R6) in 10 episodes, at least 2 "
            "required");
  EXPECT_EQ(missed[1], "class durable+throttled: 3 redriven in 10 episodes, at least 50 required");
}

TEST(SimCoverage, every_class_must_crash_expire_dead_letter_redrive_and_reclaim) {
  for (std::size_t i = 0; i < class_count; ++i) {
    std::vector<event> required;
    for (const auto& m : minimums_of(static_cast<episode_class>(i))) required.push_back(m.e);
    auto reclaim =
        is_durable(static_cast<episode_class>(i)) ? event::durable_old_leases : event::reclaims;
    for (auto e : {event::crashes, event::expiries, event::dead_letters, event::redrives, reclaim})
      EXPECT_NE(std::find(required.begin(), required.end(), e), required.end())
          << class_names[i] << ": " << event_names[static_cast<std::size_t>(e)];
  }
}

TEST(SimCoverage, only_throttled_classes_must_judge_throttled_answers_for_fairness) {
  for (std::size_t i = 0; i < class_count; ++i) {
    auto c = static_cast<episode_class>(i);
    auto m = minimums_of(c);
    auto judged = std::any_of(m.begin(), m.end(), [](const minimum& x) {
      return x.e == event::throttled_fairness_checks;
    });
    EXPECT_EQ(judged, is_throttled(c)) << class_names[i];
  }
  auto rc = run_with(10, 20);
  rc.of(episode_class::fast_throttled)
      .n[static_cast<std::size_t>(event::throttled_fairness_checks)] = 4;
  auto missed = unmet(rc);
  ASSERT_EQ(missed.size(), 1u);
  EXPECT_EQ(
      missed[0],
      "class fast+throttled: 4 throttled answers judged for fairness in 10 episodes, at least "
      "20 required");
}

TEST(SimCoverage, an_empty_class_misses_every_minimum) {
  auto rc = run_with(10, 20);
  rc.of(episode_class::durable) = coverage{};
  auto missed = unmet(rc);
  EXPECT_EQ(missed.size(), minimums_of(episode_class::durable).size());
}

}  // namespace
}  // namespace laneq::sim
