// The remote admin actor (actors/include/laneq/actors/remote_admin.hpp): reads the JSON specs of
// queues and topics and delegates every request to the in-process admin actor.
#include "laneq/actors/remote_admin.hpp"
#include "laneq/actors/actor_base.hpp"

#include <boost/json/parse.hpp>

#include "laneq/spec_json.hpp"

namespace laneq {

namespace {

class remote_admin_impl : public actor_base<remote_admin_actor> {
 public:
  remote_admin_impl(caf::actor_config& cfg, admin_actor admin)
      : actor_base<remote_admin_actor>(cfg), admin_(std::move(admin)) {
    // Follows the admin actor: a published remote admin must not outlive the broker.
    link_to(admin_);
  }

  const char* name() const override { return "laneq.remote_admin"; }

  behavior_type make_behavior() override {
    return {
        [this](create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<queue_api, bool> {
          boost::json::error_code ec;
          auto v = boost::json::parse(spec_json, ec);
          if (ec)
            return to_caf(
                error{errc::invalid_spec,
                      "queue '" + name + "': spec: is not valid JSON (" + ec.message() + ")"});
          auto parsed = queue_spec_from_json(name, v);
          if (!parsed.ok()) return to_caf(combine(parsed.errors));
          return delegate(admin_, create_atom_v, std::move(parsed.spec));
        },
        [this](lookup_atom, const std::string& name) {
          return delegate(admin_, lookup_atom_v, name);
        },
        [this](list_atom) { return delegate(admin_, list_atom_v); },
        [this](describe_atom, const std::string& name) {
          return delegate(admin_, describe_atom_v, name);
        },
        [this](drop_atom, const std::string& name) { return delegate(admin_, drop_atom_v, name); },
        [this](topic_atom, create_atom, const std::string& name,
               const std::string& spec_json) -> caf::result<bool> {
          boost::json::error_code ec;
          auto v = boost::json::parse(spec_json, ec);
          if (ec)
            return to_caf(
                error{errc::invalid_spec,
                      "topic '" + name + "': spec: is not valid JSON (" + ec.message() + ")"});
          auto parsed = topic_spec_from_json(name, v);
          if (!parsed.ok()) return to_caf(combine(parsed.errors));
          return delegate(admin_, create_atom_v, std::move(parsed.spec));
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

remote_admin_actor spawn_remote_admin(caf::actor_system& sys, admin_actor admin) {
  return sys.spawn<remote_admin_impl>(std::move(admin));
}

}  // namespace laneq
