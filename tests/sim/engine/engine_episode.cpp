// Drawing an engine-simulation episode (engine_episode.hpp): its queues' specs and engine
// settings, its store's failure rates and crash rate, all from the seed and the episode number.
#include "engine_episode.hpp"

#include <sstream>

namespace laneq::sim {

using namespace std::chrono_literals;
using engine_cov::episode_class;

namespace {

/// The start of every episode's timeline.
constexpr timestamp origin = timestamp::from_ms(1'000'000);

const char* name_of(grouping g) {
  switch (g) {
    case grouping::none: return "unordered";
    case grouping::whole_queue: return "ordered()";
    case grouping::account: return "ordered_by(header:account)";
    case grouping::tenant_and_account: return "ordered_by(fairness_key, header:account)";
  }
  return "?";
}

}  // namespace

engine_episode::engine_episode(std::uint64_t seed, std::uint64_t episode, std::uint64_t steps,
                               engine_cov::coverage& cov)
    : seed_(seed),
      episode_(episode),
      steps_(steps),
      class_(engine_cov::class_of_episode(episode)),
      cov_(cov),
      rng_(seed * 1'000'003 + episode * 7'919 + 13) {
  std::vector<shard_config> cfgs;
  clients_.resize(1 + pick(3));
  for (std::size_t i = 0; i < clients_.size(); ++i) cfgs.push_back(draw_queue(i, clients_[i]));
  crash_per_mille_ = 1 + pick(5);
  write_fail_per_mille_ = 1 + pick(15);
  reopen_ = pick_us(1'000, 400'000);
  read_fail_per_mille_ = 10 + pick(200);
  world_ = std::make_unique<engine_world>(
      std::move(cfgs), origin, [this](check k, const std::string& what) { fail(k, what); },
      [this](std::size_t q, timestamp t) { clients_[q].checker->recovered(t); });
  cov_.bump(engine_cov::event::episodes);
}

engine_episode::~engine_episode() = default;

std::uint64_t engine_episode::pick(std::uint64_t n) {
  return std::uniform_int_distribution<std::uint64_t>{0, n - 1}(rng_);
}

duration engine_episode::pick_us(std::int64_t lo, std::int64_t hi) {
  return duration{lo + static_cast<std::int64_t>(pick(static_cast<std::uint64_t>(hi - lo) + 1))};
}

/// One queue: its spec (ordering, attempts, lease, delivery mode, throttles, dedupe) and its
/// engine's settings (small group windows so that windows are read back, a reclaim grace by the
/// episode's class, a short store retry).
shard_config engine_episode::draw_queue(std::size_t i, queue_client& c) {
  c.name = "q" + std::to_string(i);
  queue_spec spec(c.name);
  draw_ordering(spec, c);
  shard_config cfg;
  draw_limits(spec, cfg, c);
  cfg.uid = 100 + i;
  cfg.nonces = nonce_source{seed_, episode_ * 8 + i};
  cfg.window = 2 + pick(7);
  cfg.window_max = cfg.window + pick(9);
  auto budget = pick(3);
  cfg.window_budget_bytes = budget == 0 ? 200 + pick(2'000) : budget == 1 ? 20'000 : 1 << 24;
  cfg.store_retry = pick_us(10'000, 300'000);
  if (class_ == episode_class::fast_grace)
    cfg.reclaim_grace = pick(2) == 0 ? pick_us(1'000, 50'000) : pick_us(200'000, 3'000'000);
  else
    cfg.reclaim_grace = duration{0};
  if (class_ == episode_class::durable) spec.delivery(delivery_durability::durable);
  checker_config cc;
  cc.durable = class_ == episode_class::durable;
  cc.max_attempts = spec.attempts_max();
  cc.reclaim_grace = cfg.reclaim_grace;
  cc.context = [this, i] { return context() + "\n  queue " + clients_[i].name; };
  cc.trace = std::getenv("LANEQ_SIM_TRACE") != nullptr;
  cc.origin = origin;
  cc.lease = c.lease;
  cc.label = c.name;
  c.checker = std::make_unique<answer_checker>(std::move(cc));
  cfg.spec = std::move(spec);
  return cfg;
}

void engine_episode::draw_ordering(queue_spec& spec, queue_client& c) {
  c.groups = static_cast<grouping>(pick(4));
  c.accounts = 1 + pick(8);
  c.tenants = 1 + pick(4);
  switch (c.groups) {
    case grouping::none: break;
    case grouping::whole_queue: spec.ordered(); break;
    case grouping::account: spec.ordered_by({key::header("account")}); break;
    case grouping::tenant_and_account:
      spec.ordered_by({key::fairness_key(), key::header("account")});
      break;
  }
  if (c.groups == grouping::account || c.groups == grouping::tenant_and_account) {
    c.keyless_lane = pick(2) == 0;
    spec.when_ordering_key_missing(c.keyless_lane ? missing_ordering_key::keyless_lane
                                                  : missing_ordering_key::unordered);
  }
}

void engine_episode::draw_limits(queue_spec& spec, shard_config& cfg, queue_client& c) {
  spec.max_attempts(pick(5) == 0 ? limits::max_attempts_max
                                 : static_cast<std::uint32_t>(1 + pick(4)));
  c.lease = pick_us(20'000, 500'000);
  c.longest_lease = c.lease;
  spec.lease(c.lease);
  c.weight = 1 + pick(4);
  if (pick(3) == 0) {
    auto which = 1 + pick(3);
    if (which & 1)
      spec.throttle({key::fairness_key()}, 5.0 + double(pick(100)),
                    static_cast<std::uint32_t>(1 + pick(4)));
    if (which & 2) spec.throttle({key::header("account")}, 20.0, 2);
  }
  if (pick(3) == 0) {
    c.dedupe = true;
    c.resend = pick(2) == 0;
    // Resends need the original's entry: a long window, and resends only to messages so recent
    // that the entry bound has not evicted them. Otherwise a short window and a small bound, so
    // that entries expire and are evicted.
    cfg.dedupe_entries_max = c.resend ? 64 + pick(192) : 4 + pick(60);
    c.resend_horizon = cfg.dedupe_entries_max / 2;
    spec.dedupe({key::header("id")}, c.resend ? duration{3'600'000'000} : pick_us(5'000, 500'000));
  }
}

std::string engine_episode::context() const {
  std::ostringstream os;
  os << "seed " << seed_ << ", episode " << episode_ << " ("
     << engine_cov::class_names[static_cast<std::size_t>(class_)] << "), step " << step_
     << (draining_ ? " (drain)" : "") << ", t=" << (world_ ? (world_->now() - origin).count() : 0)
     << "us";
  for (std::size_t i = 0; world_ && i < clients_.size(); ++i) {
    const auto& cfg = world_->config(i);
    os << "\n  " << clients_[i].name << ": " << name_of(clients_[i].groups)
       << (clients_[i].keyless_lane ? " keyless lane" : "") << ", " << cfg.spec.describe()
       << ", window " << cfg.window << ".." << cfg.window_max << ", budget "
       << cfg.window_budget_bytes << " bytes, epoch " << cfg.epoch << ", reclaim grace "
       << cfg.reclaim_grace.count() << "us";
  }
  os << "\n  rerun: LANEQ_SIM_SEED=" << seed_ << " LANEQ_ENGINE_SIM_EPISODE=" << episode_
     << " LANEQ_ENGINE_SIM_STEPS=" << steps_
     << " build/release/bin/laneq_engine_sim_tests --gtest_filter='EngineSim.*'";
  return os.str();
}

void engine_episode::fail(check kind, const std::string& what) {
  throw checker_failure("INVARIANT VIOLATED (" + std::string{name_of(kind)} + "): " + what +
                        "\n  " + context());
}

}  // namespace laneq::sim
