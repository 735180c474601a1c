// The CAF port's gate (apps/server/include/laneq/server/caf_gate.hpp).
#include "laneq/server/caf_gate.hpp"

#include <map>
#include <tuple>

#include "laneq/actors/actor_base.hpp"

namespace laneq::server {

namespace {

caf::error log_in_first() {
  return to_caf(
      error{errc::unauthorized,
            "laneqd has tokens: send (login, token) and use the admin handle it answers"});
}

class caf_gate_impl : public actor_base<caf_gate_actor> {
 public:
  caf_gate_impl(caf::actor_config& cfg, admin_actor admin, auth_snapshot auth)
      : actor_base<caf_gate_actor>(cfg),
        admin_(std::move(admin)),
        auth_(std::move(auth)),
        enabled_(auth_->enabled()) {
    // Follows the admin actor, as the published actor always did: it must not outlive the broker.
    link_to(admin_);
    set_down_handler([this](caf::down_msg& m) { forget(m.source); });
  }

  const char* name() const override { return "laneq.caf_gate"; }

  void on_exit() override {
    for (auto& [k, s] : sessions_) send_exit(s.actor, caf::exit_reason::user_shutdown);
    sessions_.clear();
    send_exit(open_, caf::exit_reason::user_shutdown);
  }

  behavior_type make_behavior() override {
    open_ = spawn_remote_admin(system(), admin_);
    return {
        [this](login_atom, const std::string& token) -> caf::result<scoped_admin_actor> {
          return login(token);
        },
        [this](tokens_atom, auth_snapshot& next) { reload(std::move(next)); },
        [this](create_atom a, const std::string& n,
               const std::string& s) -> caf::result<queue_api, bool> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n, s);
        },
        [this](lookup_atom a, const std::string& n) -> caf::result<queue_api> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n);
        },
        [this](list_atom a) -> caf::result<std::vector<std::string>> {
          if (enabled_) return log_in_first();
          return delegate(open_, a);
        },
        [this](describe_atom a, const std::string& n) -> caf::result<queue_description> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n);
        },
        [this](drop_atom a, const std::string& n) -> caf::result<caf::ok_atom> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n);
        },
        [this](update_atom a, const std::string& n,
               const std::string& patch) -> caf::result<std::string> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n, patch);
        },
        [this](drop_atom a, const std::string& n, bool force) -> caf::result<caf::ok_atom> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n, force);
        },
        [this](redrive_atom a, const std::string& from, std::vector<message_id>& ids,
               const std::string& to) -> caf::result<std::uint64_t> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, from, std::move(ids), to);
        },
        [this](topic_atom t, create_atom a, const std::string& n,
               const std::string& s) -> caf::result<bool> {
          if (enabled_) return log_in_first();
          return delegate(open_, t, a, n, s);
        },
        [this](topic_atom t, list_atom a) -> caf::result<std::vector<topic_spec>> {
          if (enabled_) return log_in_first();
          return delegate(open_, t, a);
        },
        [this](topic_atom t, describe_atom a, const std::string& n) -> caf::result<topic_spec> {
          if (enabled_) return log_in_first();
          return delegate(open_, t, a, n);
        },
        [this](topic_atom t, drop_atom a, const std::string& n) -> caf::result<caf::ok_atom> {
          if (enabled_) return log_in_first();
          return delegate(open_, t, a, n);
        },
        [this](publish_atom a, const std::string& n,
               std::vector<outgoing_message>& b) -> caf::result<std::vector<topic_enqueued>> {
          if (enabled_) return log_in_first();
          return delegate(open_, a, n, std::move(b));
        },
    };
  }

 private:
  struct session {
    scoped_admin_actor actor;
    std::string tenant;
    std::uint64_t logged_in = 0;  ///< login order, for eviction at the bound
  };
  using key = std::pair<std::string /*token*/, caf::node_id>;

  /// An admin token (or no tokens) gets the unscoped calls; a tenant's token its session for
  /// the node it logs in from, made on its first login.
  caf::result<scoped_admin_actor> login(const std::string& token) {
    auto who = auth_->authenticate_token(token);
    if (!who) return to_caf(who.err());
    if (who.value().admin()) return open_;
    const auto& from = current_sender();
    if (from == nullptr)
      return to_caf(error{errc::unauthorized, "a login needs a sender to answer"});
    key k{token, from->node()};
    if (auto it = sessions_.find(k); it != sessions_.end()) {
      it->second.logged_in = ++logins_;
      return it->second.actor;
    }
    if (sessions_.size() >= caf_sessions_max) evict_oldest();
    auto actor = spawn_tenant_admin(system(), admin_, who.value().tenant, from->node());
    monitor(actor);
    sessions_.emplace(std::move(k), session{actor, who.value().tenant, ++logins_});
    return actor;
  }

  /// New tokens: a session whose token is gone, or names another tenant now, stops.
  void reload(auth_snapshot next) {
    auth_ = std::move(next);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto who = auth_->authenticate_token(it->first.first);
      if (who && who.value().tenant == it->second.tenant) {
        ++it;
        continue;
      }
      send_exit(it->second.actor, caf::exit_reason::user_shutdown);
      it = sessions_.erase(it);
    }
  }

  void evict_oldest() {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.logged_in < oldest->second.logged_in) oldest = it;
    send_exit(oldest->second.actor, caf::exit_reason::user_shutdown);
    sessions_.erase(oldest);
  }

  void forget(const caf::actor_addr& gone) {
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.actor.address() == gone) {
        sessions_.erase(it);
        return;
      }
  }

  admin_actor admin_;
  auth_snapshot auth_;
  bool enabled_;
  scoped_admin_actor open_;  ///< the unscoped calls: no tokens, or an admin token
  std::map<key, session> sessions_;
  std::uint64_t logins_ = 0;
};

}  // namespace

caf_gate_actor spawn_caf_gate(caf::actor_system& sys, admin_actor admin, auth_snapshot auth) {
  return sys.spawn<caf_gate_impl>(std::move(admin), std::move(auth));
}

}  // namespace laneq::server
