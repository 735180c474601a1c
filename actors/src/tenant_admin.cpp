// A tenant's admin calls over the CAF port (actors/include/laneq/actors/remote_admin.hpp,
// `spawn_tenant_admin`): names scoped to the tenant by the rule HTTP applies (laneq/tenant.hpp),
// listings filtered, and queue handles that are proxies serving only the node that logged in.
// docs/caf-client.md, "Tokens and tenants".
#include <map>

#include <boost/json/serialize.hpp>

#include "laneq/actors/actor_base.hpp"
#include "laneq/actors/remote_admin.hpp"
#include "laneq/spec_json.hpp"
#include "laneq/tenant.hpp"
#include "remote_specs.hpp"

namespace laneq {

namespace {

/// The request came from another node than the one that logged in: a handle reached by its
/// actor id (BASP lets a peer address any actor by id) rather than given to this client.
caf::error stranger() {
  return to_caf(error{errc::forbidden, "this handle serves the CAF node that logged in only"});
}

/// A queue handle of a tenant's session: forwards every call of `queue_api` to the queue.
/// Stops when the queue does (the queue was dropped) or when its session does.
class scoped_queue_impl : public actor_base<queue_api> {
 public:
  scoped_queue_impl(caf::actor_config& cfg, queue_api q, caf::actor session, caf::node_id client)
      : actor_base<queue_api>(cfg), q_(std::move(q)), client_(std::move(client)) {
    monitor(q_);
    monitor(session);
    set_down_handler([this](caf::down_msg& m) { quit(m.reason); });
  }

  const char* name() const override { return "laneq.scoped_queue"; }

  behavior_type make_behavior() override {
    return {
        [this](enqueue_atom a,
               std::vector<outgoing_message>& b) -> caf::result<std::vector<message_id>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, std::move(b));
        },
        [this](receive_atom a, const receive_request& r) -> caf::result<std::vector<delivery>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, r);
        },
        [this](ack_atom a,
               std::vector<lease_token>& ls) -> caf::result<std::vector<lease_outcome>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, std::move(ls));
        },
        [this](ack_atom a, const lease_token& l, std::uint32_t n) -> caf::result<std::uint64_t> {
          if (!from_client()) return stranger();
          return delegate(q_, a, l, n);
        },
        [this](nack_atom a, const lease_token& l,
               const nack_request& r) -> caf::result<caf::ok_atom> {
          if (!from_client()) return stranger();
          return delegate(q_, a, l, r);
        },
        [this](extend_atom a, const lease_token& l, std::int64_t by) -> caf::result<timestamp> {
          if (!from_client()) return stranger();
          return delegate(q_, a, l, by);
        },
        [this](dlq_atom a, std::uint32_t max) -> caf::result<std::vector<dead_letter>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, max);
        },
        [this](redrive_atom a, std::vector<message_id>& ids) -> caf::result<std::uint64_t> {
          if (!from_client()) return stranger();
          return delegate(q_, a, std::move(ids));
        },
        [this](dlq_atom a, std::vector<message_id>& ids) -> caf::result<std::vector<dead_letter>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, std::move(ids));
        },
        [this](dlq_atom a, drop_atom d,
               std::vector<message_id>& ids) -> caf::result<std::uint64_t> {
          if (!from_client()) return stranger();
          return delegate(q_, a, d, std::move(ids));
        },
        [this](purge_atom a, const group_filter& g) -> caf::result<std::uint64_t> {
          if (!from_client()) return stranger();
          return delegate(q_, a, g);
        },
        [this](peek_atom a, const peek_request& r) -> caf::result<std::vector<peeked_message>> {
          if (!from_client()) return stranger();
          return delegate(q_, a, r);
        },
        [this](stats_atom a) -> caf::result<queue_stats> {
          if (!from_client()) return stranger();
          return delegate(q_, a);
        },
        [this](groups_atom a, const groups_query& g) -> caf::result<groups_page> {
          if (!from_client()) return stranger();
          return delegate(q_, a, g);
        },
    };
  }

 private:
  bool from_client() {
    const auto& s = current_sender();
    return s != nullptr && s->node() == client_;
  }

  queue_api q_;
  caf::node_id client_;
};

/// A tenant's session: the admin calls of `scoped_admin_actor` for one tenant and one client node.
class tenant_admin_impl : public actor_base<scoped_admin_actor> {
 public:
  tenant_admin_impl(caf::actor_config& cfg, admin_actor admin, std::string tenant,
                    caf::node_id client)
      : actor_base<scoped_admin_actor>(cfg),
        admin_(std::move(admin)),
        tenant_(std::move(tenant)),
        client_(std::move(client)) {
    // Monitored, not linked: a session that ends (its token revoked) must not stop the broker.
    monitor(admin_);
    set_down_handler([this](caf::down_msg& m) { on_down(m); });
  }

  const char* name() const override { return "laneq.tenant_admin"; }

  // Longer than most functions: a typed behavior lists one handler per message of
  // `scoped_admin_actor` in one place; each scopes its name first and then asks the admin actor.
  behavior_type make_behavior() override {
    return {
        [this](create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<queue_api, bool> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          auto spec = queue_spec_from_text(full.value(), spec_json);
          if (!spec) return to_caf(spec.err());
          auto rp = make_response_promise<queue_api, bool>();
          request(admin_, caf::infinite, create_atom_v, std::move(spec).value())
              .then([this, rp](queue_api& q,
                               bool created) mutable { rp.deliver(handle_of(q), created); },
                    [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](lookup_atom, const std::string& name) -> caf::result<queue_api> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          auto rp = make_response_promise<queue_api>();
          request(admin_, caf::infinite, lookup_atom_v, full.value())
              .then([this, rp](queue_api& q) mutable { rp.deliver(handle_of(q)); },
                    [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](list_atom) -> caf::result<std::vector<std::string>> {
          if (!from_client()) return stranger();
          auto rp = make_response_promise<std::vector<std::string>>();
          request(admin_, caf::infinite, list_atom_v)
              .then(
                  [this, rp](std::vector<std::string>& names) mutable { rp.deliver(mine(names)); },
                  [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](describe_atom, const std::string& name) -> caf::result<queue_description> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          return delegate(admin_, describe_atom_v, full.value());
        },
        [this](drop_atom, const std::string& name) -> caf::result<caf::ok_atom> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          return delegate(admin_, drop_atom_v, full.value());
        },
        [this](update_atom, const std::string& name,
               const std::string& patch) -> caf::result<std::string> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          auto rp = make_response_promise<std::string>();
          request(admin_, caf::infinite, update_atom_v, full.value(), patch)
              .then(
                  [rp](queue_spec& spec) mutable {
                    rp.deliver(boost::json::serialize(queue_spec_to_json(spec)));
                  },
                  [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](drop_atom, const std::string& name, bool force) -> caf::result<caf::ok_atom> {
          auto full = scope(name, "queue");
          if (!full) return to_caf(full.err());
          return delegate(admin_, drop_atom_v, full.value(), force);
        },
        [this](redrive_atom, const std::string& from, std::vector<message_id>& ids,
               const std::string& to) -> caf::result<std::uint64_t> {
          auto source = scope(from, "queue");
          if (!source) return to_caf(source.err());
          auto target = scope(to, "queue");
          if (!target) return to_caf(target.err());
          return delegate(admin_, redrive_atom_v, source.value(), std::move(ids), target.value());
        },
        [this](topic_atom, create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<bool> {
          auto full = scope(name, "topic");
          if (!full) return to_caf(full.err());
          // A tenant names its queues bare, as in its queue calls.
          auto spec = topic_spec_from_text(full.value(), spec_json, [this](std::string q) {
            return scope_to_tenant(tenant_, std::move(q));
          });
          if (!spec) return to_caf(spec.err());
          return delegate(admin_, create_atom_v, std::move(spec).value());
        },
        [this](topic_atom, list_atom) -> caf::result<std::vector<topic_spec>> {
          if (!from_client()) return stranger();
          auto rp = make_response_promise<std::vector<topic_spec>>();
          request(admin_, caf::infinite, topic_atom_v, list_atom_v)
              .then(
                  [this, rp](std::vector<topic_spec>& topics) mutable { rp.deliver(mine(topics)); },
                  [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](topic_atom, describe_atom, const std::string& name) -> caf::result<topic_spec> {
          auto full = scope(name, "topic");
          if (!full) return to_caf(full.err());
          return delegate(admin_, topic_atom_v, lookup_atom_v, full.value());
        },
        [this](topic_atom, drop_atom, const std::string& name) -> caf::result<caf::ok_atom> {
          auto full = scope(name, "topic");
          if (!full) return to_caf(full.err());
          return delegate(admin_, topic_atom_v, drop_atom_v, full.value());
        },
        [this](publish_atom, const std::string& name,
               std::vector<outgoing_message>& batch) -> caf::result<std::vector<topic_enqueued>> {
          auto full = scope(name, "topic");
          if (!full) return to_caf(full.err());
          return delegate(admin_, publish_atom_v, full.value(), std::move(batch));
        },
    };
  }

 private:
  bool from_client() {
    const auto& s = current_sender();
    return s != nullptr && s->node() == client_;
  }

  /// The full name `name` means for this tenant; forbidden for another tenant's (or a request
  /// from another node).
  result<std::string> scope(const std::string& name, std::string_view what) {
    if (!from_client())
      return error{errc::forbidden, "this handle serves the CAF node that logged in only"};
    return scope_to_tenant(tenant_, name, what);
  }

  std::vector<std::string> mine(std::vector<std::string>& names) const {
    std::vector<std::string> out;
    for (auto& n : names)
      if (tenant_may_use(tenant_, n)) out.push_back(std::move(n));
    return out;
  }

  std::vector<topic_spec> mine(std::vector<topic_spec>& topics) const {
    std::vector<topic_spec> out;
    for (auto& t : topics)
      if (tenant_may_use(tenant_, t.name())) out.push_back(std::move(t));
    return out;
  }

  /// The proxy this session gives out for the queue `q` (one per queue, made on first use).
  queue_api handle_of(const queue_api& q) {
    auto id = q->id();
    if (auto it = proxies_.find(id); it != proxies_.end()) return it->second;
    auto proxy = spawn<scoped_queue_impl>(q, caf::actor_cast<caf::actor>(this), client_);
    monitor(proxy);
    proxies_.emplace(id, proxy);
    return proxy;
  }

  void on_down(const caf::down_msg& m) {
    if (m.source == admin_.address()) return quit(m.reason);
    for (auto it = proxies_.begin(); it != proxies_.end(); ++it)
      if (it->second.address() == m.source) {
        proxies_.erase(it);
        return;
      }
  }

  admin_actor admin_;
  std::string tenant_;
  caf::node_id client_;
  /// Proxies by the id of the queue actor they forward to (a queue dropped and made again under
  /// the same name is another actor, so it gets another proxy). At most one per queue.
  std::map<caf::actor_id, queue_api> proxies_;
};

}  // namespace

scoped_admin_actor spawn_tenant_admin(caf::actor_system& sys, admin_actor admin, std::string tenant,
                                      caf::node_id client) {
  return sys.spawn<tenant_admin_impl>(std::move(admin), std::move(tenant), std::move(client));
}

}  // namespace laneq
