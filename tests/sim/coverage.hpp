// What the seeded simulation (sim_test.cpp) reached, per episode class, and the minimums a run
// must reach (RELIABILITY.md T1: coverage is asserted, not only printed). A run whose episodes of
// some class never crashed, reclaimed, expired, dead-lettered or redrove proves nothing about
// those paths, so it fails with a message naming the class and the event it did not reach.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace laneq::sim {

/// Events counted over a run.
enum class event : std::size_t {
  episodes,
  deliveries,
  grouped_deliveries,
  delayed_deliveries,
  acks,
  nacks,
  expiries,
  dead_letters,  // on a nack or on the last attempt's expiry
  redrives,
  stale_rejected,
  crashes,
  recovered,
  held_heads,
  reclaims,            // fast delivery: an old token took its held head back (R6)
  durable_old_leases,  // durable delivery: a lease of an earlier run used after a restart (R7)
  old_tokens_refused,
  long_polls_waited,    // a long poll not answered at once
  long_polls_answered,  // ... and later answered with deliveries
  // A throttled queue's answer given at once, judged for progress and round-robin: some
  // fairness key had a message surely ready (sim_test.cpp, surely_ready_keys).
  throttled_fairness_checks,
  count_
};

inline constexpr std::size_t event_count = static_cast<std::size_t>(event::count_);

inline constexpr std::array<const char*, event_count> event_names = {
    "episodes",
    "deliveries",
    "grouped deliveries",
    "delayed deliveries",
    "acks",
    "nacks",
    "lease expiries",
    "dead letters",
    "redriven",
    "stale leases rejected",
    "crashes",
    "messages recovered",
    "heads held for a reclaim grace",
    "reclaims by an old token (R6)",
    "durable leases used after a restart (R7)",
    "old tokens refused",
    "long polls that waited",
    "long polls answered after waiting",
    "throttled answers judged for fairness"};

/// Episodes take their class from their number, in turn, so every class gets its share of a
/// run; everything else about an episode is drawn from the seed.
enum class episode_class : std::size_t { fast, durable, fast_throttled, durable_throttled, count_ };

inline constexpr std::size_t class_count = static_cast<std::size_t>(episode_class::count_);

inline constexpr std::array<const char*, class_count> class_names = {
    "fast", "durable", "fast+throttled", "durable+throttled"};

inline episode_class class_of_episode(std::uint64_t episode) {
  return static_cast<episode_class>(episode % class_count);
}
inline bool is_durable(episode_class c) {
  return c == episode_class::durable || c == episode_class::durable_throttled;
}
inline bool is_throttled(episode_class c) {
  return c == episode_class::fast_throttled || c == episode_class::durable_throttled;
}

struct coverage {
  std::array<std::uint64_t, event_count> n{};

  void bump(event e, std::uint64_t k = 1) { n[static_cast<std::size_t>(e)] += k; }
  std::uint64_t operator[](event e) const { return n[static_cast<std::size_t>(e)]; }
  coverage& operator+=(const coverage& o) {
    for (std::size_t i = 0; i < event_count; ++i) n[i] += o.n[i];
    return *this;
  }
};

struct run_coverage {
  std::array<coverage, class_count> by_class;

  coverage& of(episode_class c) { return by_class[static_cast<std::size_t>(c)]; }
  coverage total() const {
    coverage t;
    for (const auto& c : by_class) t += c;
    return t;
  }
};

/// A minimum: at least `per_episode` events `e` per episode of a class (and at least one).
struct minimum {
  event e;
  double per_episode;
};

/// The minimums every class must reach. "Reclaims" are the old token taking its head back on
/// fast delivery and the old lease honoured on durable delivery: each is what a lease holder
/// from before a restart gets. A throttled class must also judge answers for fairness, so that
/// the throttled progress and round-robin check cannot go blind. The rates are at most half
/// (mostly a fifth) of the lowest that 60 seeds of 30,000 steps reached per class (the
/// throttled fairness judgements: 64 seeds, lowest 9.7 per episode, median about 165;
/// tests/README.md), so a healthy run meets them.
inline std::vector<minimum> minimums_of(episode_class c) {
  std::vector<minimum> m{{event::crashes, 1.0},
                         {event::expiries, 5.0},
                         {event::dead_letters, 5.0},
                         {event::redrives, 5.0}};
  m.push_back(is_durable(c) ? minimum{event::durable_old_leases, 0.25}
                            : minimum{event::reclaims, 0.25});
  if (is_throttled(c)) m.push_back({event::throttled_fairness_checks, 2.0});
  return m;
}

/// Runs shorter than this many episodes per class are not judged (a rerun of a few steps).
inline constexpr std::uint64_t judged_episodes_min = 3;

/// What the run did not reach, one line each; empty when every minimum was met.
inline std::vector<std::string> unmet(const run_coverage& rc) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < class_count; ++i) {
    const auto& c = rc.by_class[i];
    auto episodes = c[event::episodes];
    for (const auto& m : minimums_of(static_cast<episode_class>(i))) {
      auto need =
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(m.per_episode * double(episodes)));
      if (c[m.e] >= need) continue;
      out.push_back(std::string{"class "} + class_names[i] + ": " + std::to_string(c[m.e]) + " " +
                    event_names[static_cast<std::size_t>(m.e)] + " in " + std::to_string(episodes) +
                    " episodes, at least " + std::to_string(need) + " required");
    }
  }
  return out;
}

}  // namespace laneq::sim
