// The operator commands: dead letters, groups, stats, health, metrics and backups (see cli.hpp).
#include "cli.hpp"

namespace laneq::cli {

namespace json = boost::json;

int cmd_dlq_list(command_context& c) {
  auto r = c.client.dead_letters(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_dead_letters(r.value());
  return exit_ok;
}

int cmd_dlq_redrive(command_context& c) {
  std::vector<std::string> ids(c.args.args.begin() + 1, c.args.args.end());
  auto to = c.args.value("to");
  auto r =
      to ? c.client.redrive_into(c.args.args[0], ids, *to) : c.client.redrive(c.args.args[0], ids);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  auto count = field_text(r.value(), "redriven");
  c.out << "redrove "
        << (count.empty() ? (ids.empty() ? std::string("all") : std::to_string(ids.size())) : count)
        << " dead letters of " << c.args.args[0]
        << (to ? " into " + *to : std::string(" back into the queue")) << "\n";
  return exit_ok;
}

int cmd_dlq_delete(command_context& c) {
  std::vector<std::string> ids(c.args.args.begin() + 1, c.args.args.end());
  bool all = c.args.flag("all");
  if (all == !ids.empty())
    return usage(c, usage_error{all ? "give IDs or --all, not both"
                                    : "name the dead letters to delete, or --all for every one"});
  auto r = ids.size() == 1 ? c.client.delete_dead_letter(c.args.args[0], ids[0])
                           : c.client.delete_dead_letters(c.args.args[0], ids);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  c.out << "deleted " << field_text(r.value(), "deleted", "0") << " dead letter(s) of "
        << c.args.args[0] << "\n";
  return exit_ok;
}

int cmd_groups(command_context& c) {
  client::groups_params p;
  p.blocked_only = c.args.flag("blocked");
  if (auto n = c.args.number("limit")) p.limit = static_cast<std::uint32_t>(*n);
  if (auto v = c.args.value("cursor")) p.cursor = *v;
  auto r = c.client.groups(c.args.args[0], p);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_groups(r.value());
  return exit_ok;
}

int cmd_stats(command_context& c) {
  std::vector<std::string> names;
  if (!c.args.args.empty()) {
    names = c.args.args;
  } else {
    auto l = c.client.list_queues();
    if (!l) return fail(c, l.err());
    if (auto* arr = find_array(l.value(), "queues")) {
      for (const auto& q : *arr) {
        if (q.is_string())
          names.emplace_back(q.as_string().c_str());
        else if (q.is_object() && q.as_object().contains("name"))
          names.push_back(text_of(q.as_object().at("name")));
      }
    }
  }
  json::object all;
  for (const auto& n : names) {
    auto r = c.client.get_queue(n);
    if (!r) return fail(c, r.err());
    json::value stats = r.value();
    if (auto* o = r.value().if_object())
      if (auto* s = o->if_contains("stats")) stats = *s;
    all[n] = std::move(stats);
  }
  if (c.args.json) {
    print_json(c, all);
  } else if (all.empty()) {
    c.out << "no queues\n";
  } else {
    c.out << render_stats(all, c.args.flag("wide"));
  }
  return exit_ok;
}

int cmd_health(command_context& c) {
  auto r = c.client.health();
  if (!r) return fail(c, r.err());
  const auto& a = r.value();
  if (c.args.json) {
    json::error_code ec;
    auto v = json::parse(a.body, ec);
    print_json(c, ec ? json::value(json::object{{"status", a.status}, {"body", a.body}}) : v);
  } else {
    std::string body = a.body;
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    json::error_code ec;
    auto v = json::parse(body, ec);
    if (!ec && v.is_object()) {  // {"status": "ok", ...} as key=value pairs
      body.clear();
      for (const auto& kv : v.as_object())
        body += (body.empty() ? "" : " ") + std::string(kv.key()) + "=" + text_of(kv.value());
    }
    c.out << (a.status == 200 ? "healthy" : "unhealthy") << " (HTTP " << a.status << ")"
          << (body.empty() ? "" : ": " + one_line(body)) << "\n";
  }
  return a.status == 200 ? exit_ok : exit_server_error;
}

int cmd_backup(command_context& c) {
  auto r = c.client.checkpoint(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  const auto* o = r.value().if_object();
  if (o == nullptr || !o->contains("dir") || !o->contains("bytes")) {
    client::api_error e;
    e.kind = client::failure_kind::protocol;
    e.http_status = 200;
    e.message =
        "the checkpoint answer has no dir and bytes: " + one_line(json::serialize(r.value()));
    return fail(c, e);
  }
  c.out << "checkpoint written to " << field(*o, "dir") << ": " << field(*o, "files") << " files, "
        << field(*o, "bytes") << " bytes in " << field(*o, "ms") << " ms\n"
        << "restore: copy that directory anywhere, then laneqd --data-dir <the copy>\n";
  return exit_ok;
}

int cmd_metrics(command_context& c) {
  auto r = c.client.metrics();
  if (!r) return fail(c, r.err());
  c.out << r.value();
  return exit_ok;
}

}  // namespace laneq::cli
