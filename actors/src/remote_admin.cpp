// The unscoped remote admin actor (actors/include/laneq/actors/remote_admin.hpp): reads the JSON
// specs of queues and topics and delegates every request to the in-process admin actor.
#include "laneq/actors/remote_admin.hpp"
#include "laneq/actors/actor_base.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "laneq/spec_json.hpp"
#include "remote_specs.hpp"

namespace laneq {

namespace {

result<boost::json::value> parse_json(const std::string& what, const std::string& text) {
  boost::json::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec)
    return error{errc::invalid_spec, what + ": spec: is not valid JSON (" + ec.message() + ")"};
  return v;
}

}  // namespace

result<queue_spec> queue_spec_from_text(const std::string& name, const std::string& text) {
  auto v = parse_json("queue '" + name + "'", text);
  if (!v) return v.err();
  auto parsed = queue_spec_from_json(name, v.value());
  if (!parsed.ok()) return combine(parsed.errors);
  return std::move(parsed.spec);
}

result<topic_spec> topic_spec_from_text(const std::string& name, const std::string& text,
                                        const queue_name_map& map_queue) {
  auto v = parse_json("topic '" + name + "'", text);
  if (!v) return v.err();
  if (auto* o = v.value().if_object(); o != nullptr && map_queue)
    if (auto* qs = o->if_contains("queues"); qs != nullptr && qs->is_array())
      for (auto& q : qs->as_array())
        if (q.is_string()) {
          auto full = map_queue(std::string{q.as_string()});
          if (!full) return full.err();
          q = full.value();
        }
  auto parsed = topic_spec_from_json(name, v.value());
  if (!parsed.ok()) return combine(parsed.errors);
  return std::move(parsed.spec);
}

namespace {

class remote_admin_impl : public actor_base<scoped_admin_actor> {
 public:
  remote_admin_impl(caf::actor_config& cfg, admin_actor admin)
      : actor_base<scoped_admin_actor>(cfg), admin_(std::move(admin)) {
    // Follows the admin actor: a published remote admin must not outlive the broker.
    link_to(admin_);
  }

  const char* name() const override { return "laneq.remote_admin"; }

  behavior_type make_behavior() override {
    return {
        [this](create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<queue_api, bool> {
          auto spec = queue_spec_from_text(name, spec_json);
          if (!spec) return to_caf(spec.err());
          return delegate(admin_, create_atom_v, std::move(spec).value());
        },
        [this](lookup_atom, const std::string& name) {
          return delegate(admin_, lookup_atom_v, name);
        },
        [this](list_atom) { return delegate(admin_, list_atom_v); },
        [this](describe_atom, const std::string& name) {
          return delegate(admin_, describe_atom_v, name);
        },
        [this](drop_atom, const std::string& name) { return delegate(admin_, drop_atom_v, name); },
        [this](update_atom, const std::string& name, const std::string& patch) {
          auto rp = make_response_promise<std::string>();
          request(admin_, caf::infinite, update_atom_v, name, patch)
              .then(
                  [rp](queue_spec& spec) mutable {
                    rp.deliver(boost::json::serialize(queue_spec_to_json(spec)));
                  },
                  [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
          return rp;
        },
        [this](drop_atom, const std::string& name, bool force) {
          return delegate(admin_, drop_atom_v, name, force);
        },
        [this](redrive_atom, const std::string& from, std::vector<message_id>& ids,
               const std::string& to) {
          return delegate(admin_, redrive_atom_v, from, std::move(ids), to);
        },
        [this](topic_atom, create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<bool> {
          auto spec = topic_spec_from_text(name, spec_json);
          if (!spec) return to_caf(spec.err());
          return delegate(admin_, create_atom_v, std::move(spec).value());
        },
        [this](topic_atom, list_atom) { return delegate(admin_, topic_atom_v, list_atom_v); },
        [this](topic_atom, describe_atom, const std::string& name) {
          return delegate(admin_, topic_atom_v, lookup_atom_v, name);
        },
        [this](topic_atom, drop_atom, const std::string& name) {
          return delegate(admin_, topic_atom_v, drop_atom_v, name);
        },
        [this](publish_atom, const std::string& name, std::vector<outgoing_message>& batch) {
          return delegate(admin_, publish_atom_v, name, std::move(batch));
        },
    };
  }

 private:
  admin_actor admin_;
};

}  // namespace

scoped_admin_actor spawn_remote_admin(caf::actor_system& sys, admin_actor admin) {
  return sys.spawn<remote_admin_impl>(std::move(admin));
}

}  // namespace laneq
