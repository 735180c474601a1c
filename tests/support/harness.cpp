// The deterministic test harness's member functions (harness.hpp), compiled once for every
// suite that uses it.
#include "harness.hpp"

#include "sim_store.hpp"

namespace laneq::test {

harness::harness(std::uint64_t seed, broker_options opts, harness_store store)
    : sys_(cfg_),
      sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
      self_(sys_, true),
      seed_(seed),
      store_(open_store(store, opts)) {
  auto recovered = start(sim_epoch, std::move(opts));
  LANEQ_ASSERT(recovered.ok(), "a new broker starts on an empty store");
}

store_actor harness::open_store(harness_store kind, const broker_options& opts) {
  if (kind == harness_store::memory) return sys_.spawn<memory_store_impl>();
  disk_ = std::make_unique<sim_store>();
  auto opened = disk_->open(sys_, opts.persistence);
  LANEQ_ASSERT(opened.ok(), "a new store opens on an empty in-memory file system");
  return std::move(opened).value();
}

harness::harness(std::uint64_t seed, std::shared_ptr<store_faults> faults)
    : sys_(cfg_),
      sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
      self_(sys_, true),
      seed_(seed),
      store_(sys_.spawn<faulty_store>(std::move(faults))) {
  auto recovered = start(sim_epoch, {});
  LANEQ_ASSERT(recovered.ok(), "a new broker starts on an empty store");
}

harness::~harness() {
  rng_ = nullptr;
  broker_.reset();
  // The in-memory file system goes with the harness: a clean stop's flush would be wasted.
  caf::anon_send_exit(store_, disk_ ? caf::exit_reason::kill : caf::exit_reason::user_shutdown);
  run();
}

result<std::uint64_t> harness::restart(broker_options opts) {
  auto t = now();
  if (disk_) disk_->lose_power();
  broker_.reset();
  if (disk_) caf::anon_send_exit(store_, caf::exit_reason::kill);
  run();
  for (bool more = true; more;) {
    more = false;
    self_->receive([&](std::vector<delivery>&) { more = true; }, [&](caf::error&) { more = true; },
                   caf::after(std::chrono::seconds(0)) >> [] {});
  }
  if (disk_) {
    disk_->reboot();
    auto opened = disk_->open(sys_, opts.persistence);
    if (!opened) return opened.err();
    store_ = std::move(opened).value();
  }
  return start(t, std::move(opts));
}

void harness::run() {
  if (!rng_) {
    sched_.run();
    return;
  }
  while (!sched_.jobs.empty()) {
    auto n = sched_.jobs.size();
    auto i = std::uniform_int_distribution<std::size_t>{0, n - 1}(*rng_);
    if (i != 0) std::swap(sched_.jobs[0], sched_.jobs[i]);
    sched_.run_once();
  }
}

void harness::advance(duration d) {
  sched_.advance_time(std::chrono::duration_cast<caf::timespan>(d));
  run();
}

bool harness::advance_to_next_timer() {
  auto& clock = sched_.clock();
  if (clock.schedule().empty()) return false;
  auto next = clock.schedule().begin()->first;
  auto now = clock.now();
  sched_.advance_time(next > now ? next - now : caf::timespan{0});
  run();
  return true;
}

timestamp harness::now() {
  return broker_->context()->time.now(sys_.clock());
}

std::optional<result<std::pair<queue_api, bool>>> harness::collect_created() {
  std::optional<result<std::pair<queue_api, bool>>> out;
  self_->receive(
      [&](queue_api& q, bool created) {
        out.emplace(std::pair{std::move(q), created});
      },
      [&](caf::error& e) { out.emplace(from_caf(e)); },
      caf::after(std::chrono::seconds(0)) >> [] {});
  return out;
}

result<std::pair<queue_api, bool>> harness::create_flagged(queue_spec spec) {
  self_->send(broker_->admin(), create_atom_v, std::move(spec));
  run();
  auto out = collect_created();
  if (!out) return error{errc::unavailable, "no reply"};
  return std::move(*out);
}

result<queue_api> harness::create(queue_spec spec) {
  auto r = create_flagged(std::move(spec));
  if (!r) return r.err();
  return std::move(r.value().first);
}

result<std::vector<message_id>> harness::enqueue(const queue_api& q,
                                                 std::vector<outgoing_message> b) {
  return ask<std::vector<message_id>>(q, enqueue_atom_v, std::move(b));
}

result<message_id> harness::enqueue(const queue_api& q, outgoing_message m) {
  auto ids = enqueue(q, std::vector<outgoing_message>{std::move(m)});
  if (!ids) return ids.err();
  return ids.value().front();
}

result<std::vector<delivery>> harness::receive(const queue_api& q, std::uint32_t max,
                                               duration lease) {
  return ask<std::vector<delivery>>(q, receive_atom_v, receive_request{max, lease.count(), 0});
}

std::optional<result<std::vector<delivery>>> harness::long_poll(const queue_api& q,
                                                                std::uint32_t max, duration wait) {
  return try_ask<std::vector<delivery>>(q, receive_atom_v, receive_request{max, 0, wait.count()});
}

status harness::ack(const queue_api& q, const lease_token& l) {
  auto r = ask<std::vector<lease_outcome>>(q, ack_atom_v, std::vector<lease_token>{l});
  if (!r) return r.err();
  if (!r.value().empty()) return r.value().front().err;
  return ok_t{};
}

status harness::nack(const queue_api& q, const lease_token& l, duration retry_after, bool dead) {
  auto r = ask<caf::ok_atom>(
      q, nack_atom_v, l,
      nack_request{dead ? nack_kind::dead_letter : nack_kind::retry, retry_after.count()});
  if (!r) return r.err();
  return ok_t{};
}

result<timestamp> harness::extend(const queue_api& q, const lease_token& l, duration by) {
  return ask<timestamp>(q, extend_atom_v, l, by.count());
}

result<std::vector<dead_letter>> harness::dead_letters(const queue_api& q) {
  return ask<std::vector<dead_letter>>(q, dlq_atom_v, std::uint32_t{100000});
}

result<std::uint64_t> harness::redrive(const queue_api& q, std::vector<message_id> ids) {
  return ask<std::uint64_t>(q, redrive_atom_v, std::move(ids));
}

result<queue_stats> harness::stats(const queue_api& q) {
  return ask<queue_stats>(q, stats_atom_v);
}

result<laneq::groups_page> harness::page_of_groups(const queue_api& q, groups_query query) {
  return ask<laneq::groups_page>(q, groups_atom_v, std::move(query));
}

result<std::vector<group_info>> harness::groups(const queue_api& q, bool blocked_only) {
  std::vector<group_info> out;
  groups_query query{{}, limits::groups_page_max, blocked_only};
  do {
    auto page = page_of_groups(q, query);
    if (!page) return page.err();
    for (auto& g : page.value().groups) out.push_back(std::move(g));
    query.after = std::move(page.value().next);
  } while (!query.after.empty());
  return out;
}

result<queue_api> harness::lookup(const std::string& name) {
  return ask<queue_api>(broker_->admin(), lookup_atom_v, name);
}

result<std::uint64_t> harness::start(timestamp epoch, broker_options opts) {
  broker_.emplace(sys_, make_context(sys_, epoch, seed_), store_, std::move(opts), false);
  run();
  return ask<std::uint64_t>(broker_->admin(), recover_atom_v);
}

}  // namespace laneq::test
