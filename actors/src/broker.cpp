// The in-process broker and blocking clients (actors/include/laneq/actors/broker.hpp).
#include "laneq/actors/broker.hpp"

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/admin_actor.hpp"
#include "laneq/actors/memory_store.hpp"
#include "laneq/actors/remote_admin.hpp"

namespace laneq {

namespace {

/// One blocking request; `on_answer` takes the answer's values. The caller waits for it on its
/// own mailbox for at most `timeout` (`after`), not with a request timeout: CAF 0.17 hands each
/// request timeout to its clock thread, a wake-up of that thread per call (measured: about a
/// tenth of an in-process client's CPU, docs/decisions/0013-shard-engine-performance-history.md).
/// After a timeout the actor is stopped, not kept: the late answer is dropped with it. Returns
/// the error the call ended with, if any.
template <class Handle, class OnAnswer, class... Ts>
std::optional<error> ask(blocking_caller& caller, const Handle& dest, caf::timespan timeout,
                         OnAnswer on_answer, Ts&&... xs) {
  auto self = caller.take();
  std::optional<error> failed;
  bool timed_out = false;
  auto handle = (*self)->request(dest, caf::infinite, std::forward<Ts>(xs)...);
  caf::blocking_actor::accept_one_cond rc;
  (*self)->varargs_receive(
      rc, handle.id(), std::move(on_answer), [&](caf::error& e) { failed = from_caf(e); },
      caf::after(timeout) >>
          [&] {
            timed_out = true;
            failed = from_caf(caf::make_error(caf::sec::request_timeout));
          });
  if (!timed_out) caller.keep(std::move(self));
  return failed;
}

/// One blocking request answered with one value of type `T`.
template <class T, class Handle, class... Ts>
result<T> call(blocking_caller& caller, const Handle& dest, caf::timespan timeout, Ts&&... xs) {
  std::optional<T> out;
  auto failed = ask(
      caller, dest, timeout, [&](T& x) { out.emplace(std::move(x)); }, std::forward<Ts>(xs)...);
  if (failed) return *failed;
  return std::move(*out);
}

template <class Handle, class... Ts>
status call_ok(blocking_caller& caller, const Handle& dest, caf::timespan timeout, Ts&&... xs) {
  auto r = call<caf::ok_atom>(caller, dest, timeout, std::forward<Ts>(xs)...);
  if (!r) return r.err();
  return ok_t{};
}

}  // namespace

blocking_caller& blocking_caller::operator=(const blocking_caller& other) {
  if (this != &other) {
    delete kept_.exchange(nullptr, std::memory_order_acq_rel);
    sys_ = other.sys_;
  }
  return *this;
}

blocking_caller::~blocking_caller() {
  delete kept_.load(std::memory_order_acquire);
}

std::unique_ptr<blocking_self> blocking_caller::take() {
  if (auto* kept = kept_.exchange(nullptr, std::memory_order_acq_rel))
    return std::unique_ptr<blocking_self>{kept};
  // Hidden from the registry: an actor kept past the system's end must not hold up its shutdown.
  return std::make_unique<blocking_self>(*sys_, true);
}

void blocking_caller::keep(std::unique_ptr<blocking_self> self) {
  blocking_self* none = nullptr;
  if (kept_.compare_exchange_strong(none, self.get(), std::memory_order_acq_rel)) self.release();
}

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::laneq>();
  cfg.add_message_types<caf::id_block::laneq_remote>();  // queue handles sent by the remote admin
  cfg.add_error_category(caf::atom("laneq"),
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out{to_string(static_cast<errc>(code))};
                           if (ctx.match_elements<std::string>())
                             out += ": " + ctx.get_as<std::string>(0);
                           return out;
                         });
}

broker::broker(caf::actor_system& sys) : broker(sys, make_context(sys)) {}

broker::broker(caf::actor_system& sys, context_ptr ctx)
    : broker(sys, std::move(ctx), sys.spawn<memory_store_impl>()) {}

broker::broker(caf::actor_system& sys, context_ptr ctx, store_actor store, broker_options opts,
               bool owns_store)
    : sys_(sys), ctx_(std::move(ctx)), store_(std::move(store)), owns_store_(owns_store) {
  admin_ = sys.spawn<admin_actor_impl>(admin_actor_config{
      ctx_, store_, opts.sync, opts.reclaim_grace, opts.group_window, opts.group_window_max,
      opts.persistence.reopen_interval, opts.window_budget_bytes});
}

result<store_stats> broker::storage_stats(caf::timespan timeout) const {
  blocking_caller once{sys_};
  return call<store_stats>(once, store_, timeout, stats_atom_v);
}

result<checkpoint_info> broker::checkpoint(const std::string& dir, caf::timespan timeout) const {
  blocking_caller once{sys_};
  return call<checkpoint_info>(once, admin_, timeout, checkpoint_atom_v, dir);
}

result<std::unique_ptr<broker>> broker::open(caf::actor_system& sys, broker_options opts) {
  if (opts.reclaim_grace < duration{0} || opts.reclaim_grace > limits::reclaim_grace_max)
    return error{errc::invalid_argument,
                 "reclaim_grace must be between 0 and " +
                     std::to_string(limits::reclaim_grace_max.count() / 1'000'000) + " s"};
  store_actor store;
  if (opts.data_dir.empty()) {
    store = sys.spawn<memory_store_impl>();
  } else {
    opts.persistence.dir = opts.data_dir;
    auto opened = spawn_persistence(sys, opts.persistence);
    if (!opened) return opened.err();
    store = std::move(opened).value();
  }
  auto b = std::make_unique<broker>(sys, make_context(sys), std::move(store), std::move(opts));
  // Nothing is served before every stored queue is back.
  blocking_caller once{sys};
  auto recovered =
      call<std::uint64_t>(once, b->admin_, caf::timespan{std::chrono::hours{24}}, recover_atom_v);
  if (!recovered) return recovered.err();
  return b;
}

broker::~broker() {
  caf::anon_send_exit(admin_, caf::exit_reason::user_shutdown);
  if (!owns_store_) return;
  // Wait until the store has closed its database, so a broker opened next on the same data
  // directory finds it unlocked.
  blocking_self self{sys_};
  self->monitor(store_);
  self->send_exit(store_, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
}

blocking_admin::blocking_admin(caf::actor_system& sys, admin_actor admin, caf::timespan timeout)
    : caller_(sys), admin_(std::move(admin)), timeout_(timeout) {}

result<queue_api> blocking_admin::create_queue(queue_spec spec) {
  std::optional<queue_api> out;
  auto failed = ask(
      caller_, admin_, timeout_, [&](queue_api& q, bool) { out.emplace(std::move(q)); },
      create_atom_v, std::move(spec));
  if (failed) return *failed;
  return std::move(*out);
}

result<queue_api> blocking_admin::lookup(const std::string& name) {
  return call<queue_api>(caller_, admin_, timeout_, lookup_atom_v, name);
}

result<std::vector<std::string>> blocking_admin::list_queues() {
  return call<std::vector<std::string>>(caller_, admin_, timeout_, list_atom_v);
}

result<queue_description> blocking_admin::describe(const std::string& name) {
  return call<queue_description>(caller_, admin_, timeout_, describe_atom_v, name);
}

status blocking_admin::delete_queue(const std::string& name, bool force) {
  return call_ok(caller_, admin_, timeout_, drop_atom_v, name, force);
}

result<std::uint64_t> blocking_admin::redrive_into(const std::string& from,
                                                   std::vector<message_id> ids,
                                                   const std::string& to) {
  return call<std::uint64_t>(caller_, admin_, timeout_, redrive_atom_v, from, std::move(ids), to);
}

result<queue_spec> blocking_admin::update_queue(queue_spec spec) {
  return call<queue_spec>(caller_, admin_, timeout_, update_atom_v, std::move(spec));
}

result<queue_spec> blocking_admin::update_queue(const std::string& name,
                                                const std::string& patch_json) {
  return call<queue_spec>(caller_, admin_, timeout_, update_atom_v, name, patch_json);
}

result<bool> blocking_admin::create_topic(topic_spec spec) {
  return call<bool>(caller_, admin_, timeout_, create_atom_v, std::move(spec));
}

result<topic_spec> blocking_admin::lookup_topic(const std::string& name) {
  return call<topic_spec>(caller_, admin_, timeout_, topic_atom_v, lookup_atom_v, name);
}

result<std::vector<topic_spec>> blocking_admin::list_topics() {
  return call<std::vector<topic_spec>>(caller_, admin_, timeout_, topic_atom_v, list_atom_v);
}

status blocking_admin::delete_topic(const std::string& name) {
  return call_ok(caller_, admin_, timeout_, topic_atom_v, drop_atom_v, name);
}

result<std::vector<topic_enqueued>> blocking_admin::publish(const std::string& topic,
                                                            std::vector<outgoing_message> batch) {
  return call<std::vector<topic_enqueued>>(caller_, admin_, timeout_, publish_atom_v, topic,
                                           std::move(batch));
}

blocking_queue::blocking_queue(caf::actor_system& sys, queue_api q, caf::timespan timeout)
    : caller_(sys), q_(std::move(q)), timeout_(timeout) {}

result<std::vector<message_id>> blocking_queue::enqueue(std::vector<outgoing_message> batch) {
  return call<std::vector<message_id>>(caller_, q_, timeout_, enqueue_atom_v, std::move(batch));
}

result<message_id> blocking_queue::enqueue(outgoing_message m) {
  std::vector<outgoing_message> batch;
  batch.push_back(std::move(m));
  auto ids = enqueue(std::move(batch));
  if (!ids) return ids.err();
  return ids.value().front();
}

result<std::vector<delivery>> blocking_queue::receive(receive_request req) {
  auto timeout = timeout_ + std::chrono::duration_cast<caf::timespan>(duration{req.wait_us});
  return call<std::vector<delivery>>(caller_, q_, timeout, receive_atom_v, req);
}

status blocking_queue::ack(const lease_token& lease) {
  auto failed = ack(std::vector<lease_token>{lease});
  if (!failed) return failed.err();
  if (!failed.value().empty()) return failed.value().front().err;
  return ok_t{};
}

result<std::vector<lease_outcome>> blocking_queue::ack(std::vector<lease_token> leases) {
  return call<std::vector<lease_outcome>>(caller_, q_, timeout_, ack_atom_v, std::move(leases));
}

result<std::uint64_t> blocking_queue::ack(const lease_token& lease, std::uint32_t count) {
  return call<std::uint64_t>(caller_, q_, timeout_, ack_atom_v, lease, count);
}

status blocking_queue::nack(const lease_token& lease, duration retry_after) {
  return nack(lease, nack_request{nack_kind::retry, retry_after.count()});
}

status blocking_queue::nack(const lease_token& lease, const nack_request& req) {
  return call_ok(caller_, q_, timeout_, nack_atom_v, lease, req);
}

status blocking_queue::dead_letter(const lease_token& lease) {
  return nack(lease, nack_request{nack_kind::dead_letter, 0});
}

result<timestamp> blocking_queue::extend(const lease_token& lease, duration by) {
  return call<timestamp>(caller_, q_, timeout_, extend_atom_v, lease, by.count());
}

result<std::vector<laneq::dead_letter>> blocking_queue::dead_letters(std::uint32_t max) {
  return call<std::vector<laneq::dead_letter>>(caller_, q_, timeout_, dlq_atom_v, max);
}

result<std::uint64_t> blocking_queue::redrive(std::vector<message_id> ids) {
  return call<std::uint64_t>(caller_, q_, timeout_, redrive_atom_v, std::move(ids));
}

result<std::vector<laneq::dead_letter>> blocking_queue::dead_letters(std::vector<message_id> ids) {
  return call<std::vector<laneq::dead_letter>>(caller_, q_, timeout_, dlq_atom_v, std::move(ids));
}

result<std::uint64_t> blocking_queue::delete_dead_letters(std::vector<message_id> ids) {
  return call<std::uint64_t>(caller_, q_, timeout_, dlq_atom_v, drop_atom_v, std::move(ids));
}

result<std::uint64_t> blocking_queue::purge(group_filter which) {
  return call<std::uint64_t>(caller_, q_, timeout_, purge_atom_v, std::move(which));
}

result<std::vector<peeked_message>> blocking_queue::peek(peek_request req) {
  return call<std::vector<peeked_message>>(caller_, q_, timeout_, peek_atom_v, std::move(req));
}

result<queue_stats> blocking_queue::stats() {
  return call<queue_stats>(caller_, q_, timeout_, stats_atom_v);
}

result<groups_page> blocking_queue::page_of_groups(groups_query q) {
  return call<laneq::groups_page>(caller_, q_, timeout_, groups_atom_v, std::move(q));
}

result<std::vector<group_info>> blocking_queue::groups(bool blocked_only) {
  std::vector<group_info> out;
  groups_query q{{}, limits::groups_page_max, blocked_only};
  do {
    auto page = page_of_groups(q);
    if (!page) return page.err();
    for (auto& g : page.value().groups) out.push_back(std::move(g));
    q.after = std::move(page.value().next);
  } while (!q.after.empty());
  return out;
}

}  // namespace laneq
