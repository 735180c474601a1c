// The crash tests' actor system configuration and blocking store client (crash_support.hpp),
// compiled once for every crash test executable.
#include "crash_support.hpp"

namespace laneq::test {

crash_config::crash_config() {
  add_message_types<caf::id_block::laneq>();
  add_error_category(caf::atom("laneq"),
                     [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                       std::string out{to_string(static_cast<errc>(code))};
                       if (ctx.match_elements<std::string>())
                         out += ": " + ctx.get_as<std::string>(0);
                       return out;
                     });
  set("logger.verbosity", caf::atom("quiet"));
}

status store_client::write(std::vector<store_op> ops, bool sync) {
  status out = error{errc::unavailable, "no answer"};
  self_->request(store_, timeout, write_atom_v, store_write{std::move(ops), sync})
      .receive([&](caf::ok_atom) { out = ok_t{}; }, [&](caf::error& e) { out = from_caf(e); });
  return out;
}

result<std::vector<store_entry>> store_client::scan(std::string from, std::string to,
                                                    std::uint32_t max) {
  result<std::vector<store_entry>> out = error{errc::unavailable, "no answer"};
  self_->request(store_, timeout, scan_atom_v, std::move(from), std::move(to), max)
      .receive([&](std::vector<store_entry>& xs) { out = std::move(xs); },
               [&](caf::error& e) { out = from_caf(e); });
  return out;
}

result<checkpoint_info> store_client::checkpoint(std::string dir) {
  result<checkpoint_info> out = error{errc::unavailable, "no answer"};
  self_->request(store_, timeout, checkpoint_atom_v, std::move(dir))
      .receive([&](checkpoint_info& x) { out = std::move(x); },
               [&](caf::error& e) { out = from_caf(e); });
  return out;
}

store_stats store_client::stats() {
  store_stats out;
  self_->request(store_, timeout, stats_atom_v)
      .receive([&](store_stats& s) { out = std::move(s); },
               [&](caf::error& e) {
                 throw std::runtime_error("stats failed: " + to_string(from_caf(e)));
               });
  return out;
}

std::vector<status> store_client::write_many(std::vector<store_write> ws) {
  using handle = decltype(self_->request(store_, timeout, write_atom_v, store_write{}));
  std::vector<handle> handles;
  handles.reserve(ws.size());
  for (auto& w : ws) handles.push_back(self_->request(store_, timeout, write_atom_v, std::move(w)));
  std::vector<status> out;
  out.reserve(handles.size());
  for (auto& h : handles) {
    status st = error{errc::unavailable, "no answer"};
    h.receive([&](caf::ok_atom) { st = ok_t{}; }, [&](caf::error& e) { st = from_caf(e); });
    out.push_back(std::move(st));
  }
  return out;
}

void stop(caf::actor_system& sys, const store_actor& store) {
  blocking_self self{sys};
  self->monitor(store);
  self->send_exit(store, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
}

}  // namespace laneq::test
