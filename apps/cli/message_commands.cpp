// The message commands: send, topic publish, receive, ack, nack and extend (see cli.hpp).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>

#include "cli.hpp"

namespace laneq::cli {

namespace json = boost::json;

namespace {

std::string base64_encode(std::string_view in) {
  static constexpr char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(in[k]));
  };
  for (; i + 2 < in.size(); i += 3) {
    std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += tbl[(n >> 18) & 63];
    out += tbl[(n >> 12) & 63];
    out += tbl[(n >> 6) & 63];
    out += tbl[n & 63];
  }
  if (i + 1 == in.size()) {
    std::uint32_t n = byte(i) << 16;
    out += tbl[(n >> 18) & 63];
    out += tbl[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8);
    out += tbl[(n >> 18) & 63];
    out += tbl[(n >> 12) & 63];
    out += tbl[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    if (c < 0x80)
      n = 0;
    else if ((c & 0xE0) == 0xC0 && c >= 0xC2)
      n = 1;
    else if ((c & 0xF0) == 0xE0)
      n = 2;
    else if ((c & 0xF8) == 0xF0 && c <= 0xF4)
      n = 3;
    else
      return false;
    if (n > 0 && i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

/// The messages of `send` and `topic publish`: one per BODY argument (after the first argument,
/// the queue or topic), `--file` and `--stdin-lines` line, each with the headers, fairness key
/// and delay options; and `--batch`, the messages per request.
struct outgoing_batch {
  std::vector<client::outgoing> messages;
  std::size_t per_request = 100;
};

std::variant<outgoing_batch, usage_error> outgoing_from_options(command_context& c) {
  const auto& a = c.args;
  client::outgoing proto;
  for (const auto& h : a.all("header")) {
    auto eq = h.find('=');
    if (eq == std::string::npos || eq == 0)
      return usage_error{"--header wants NAME=VALUE, got \"" + h + "\""};
    proto.headers.emplace_back(h.substr(0, eq), h.substr(eq + 1));
  }
  if (auto k = a.value("fairness-key")) proto.fairness_key = *k;
  if (auto d = a.number("delay-ms")) proto.delay_ms = *d;
  outgoing_batch out;
  if (auto b = a.number("batch")) out.per_request = static_cast<std::size_t>(*b);
  proto.base64 = a.flag("base64");
  auto add = [&](std::string body, bool b64) {
    auto m = proto;
    m.body = std::move(body);
    m.base64 = b64;
    out.messages.push_back(std::move(m));
  };
  for (std::size_t i = 1; i < a.args.size(); ++i) add(a.args[i], proto.base64);
  for (const auto& path : a.all("file")) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return usage_error{"--file: cannot read \"" + path + "\""};
    std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (valid_utf8(data))
      add(std::move(data), false);
    else
      add(base64_encode(data), true);
  }
  if (a.flag("stdin-lines")) {
    std::string line;
    while (std::getline(c.in, line)) add(line, proto.base64);
  }
  if (out.messages.empty())
    return usage_error{"nothing to send: give BODY arguments, --file PATH or --stdin-lines"};
  return out;
}

}  // namespace

int cmd_send(command_context& c) {
  const auto& a = c.args;
  auto parsed_batch = outgoing_from_options(c);
  if (auto* e = std::get_if<usage_error>(&parsed_batch)) return usage(c, *e);
  const auto& msgs = std::get<outgoing_batch>(parsed_batch).messages;
  auto batch = std::get<outgoing_batch>(parsed_batch).per_request;
  std::vector<std::string> ids;
  auto step = batch;
  for (std::size_t i = 0; i < msgs.size(); i += step) {
    std::vector<client::outgoing> chunk(
        msgs.begin() + static_cast<std::ptrdiff_t>(i),
        msgs.begin() + static_cast<std::ptrdiff_t>(std::min(msgs.size(), i + step)));
    auto r = c.client.send(a.args[0], chunk);
    if (!r) {
      if (!ids.empty())
        c.err << "laneq: " << ids.size() << " of " << msgs.size()
              << " messages were sent before the failure\n";
      return fail(c, r.err());
    }
    ids.insert(ids.end(), r.value().begin(), r.value().end());
  }
  if (a.json) {
    json::array arr;
    for (const auto& id : ids) arr.emplace_back(id);
    print_json(c, json::object{{"ids", std::move(arr)}});
  } else if (a.flag("quiet")) {
    for (const auto& id : ids) c.out << id << "\n";
  } else {
    c.out << "sent " << ids.size() << (ids.size() == 1 ? " message" : " messages") << " to "
          << a.args[0] << "\n";
    for (const auto& id : ids) c.out << "  " << id << "\n";
  }
  return exit_ok;
}

/// `laneq topic publish`: each request is all or nothing over the topic's queues.
int cmd_topic_publish(command_context& c) {
  auto parsed_batch = outgoing_from_options(c);
  if (auto* e = std::get_if<usage_error>(&parsed_batch)) return usage(c, *e);
  const auto& [msgs, step] = std::get<outgoing_batch>(parsed_batch);
  std::map<std::string, std::vector<std::string>> ids;  // per queue
  std::size_t done = 0;
  for (std::size_t i = 0; i < msgs.size(); i += step) {
    std::vector<client::outgoing> chunk(
        msgs.begin() + static_cast<std::ptrdiff_t>(i),
        msgs.begin() + static_cast<std::ptrdiff_t>(std::min(msgs.size(), i + step)));
    auto r = c.client.publish(c.args.args[0], chunk);
    if (!r) {
      if (done > 0)
        c.err << "laneq: " << done << " of " << msgs.size()
              << " messages were published before the failure\n";
      return fail(c, r.err());
    }
    done += chunk.size();
    const auto* o = r.value().if_object();
    const auto* per_queue = o ? o->if_contains("ids") : nullptr;
    if (per_queue == nullptr || !per_queue->is_object()) return exit_bad_answer;
    for (const auto& [queue, list] : per_queue->as_object())
      if (const auto* arr = list.if_array())
        for (const auto& id : *arr) ids[std::string(queue)].push_back(text_of(id));
  }
  if (c.args.json) {
    json::object out;
    for (const auto& [queue, list] : ids) {
      json::array arr;
      for (const auto& id : list) arr.emplace_back(id);
      out[queue] = std::move(arr);
    }
    print_json(c, json::object{{"ids", std::move(out)}});
    return exit_ok;
  }
  c.out << "published " << done << (done == 1 ? " message" : " messages") << " to topic "
        << c.args.args[0] << "\n";
  for (const auto& [queue, list] : ids) {
    c.out << "  " << queue << ":";
    for (const auto& id : list) c.out << " " << id;
    c.out << "\n";
  }
  return exit_ok;
}

int cmd_receive(command_context& c) {
  const auto& a = c.args;
  client::receive_params p;
  if (auto n = a.number("max")) p.max = static_cast<std::uint32_t>(*n);
  if (auto n = a.number("lease-ms")) p.lease_ms = *n;
  if (auto n = a.number("wait-ms")) p.wait_ms = *n;
  if (auto n = a.number("batch")) p.batch = static_cast<std::uint32_t>(*n);
  auto r = c.client.receive(a.args[0], p);
  if (!r) return fail(c, r.err());
  if (a.json)
    print_json(c, r.value());
  else if (a.flag("quiet"))
    c.out << render_messages_quiet(r.value());
  else
    c.out << render_messages(r.value());
  return exit_ok;
}

namespace {

/// `laneq ack QUEUE LEASE --count C`: an ordered batch's first C messages.
int cmd_ack_count(command_context& c, std::int64_t count) {
  const auto& a = c.args;
  if (a.args.size() != 2) return usage(c, {"--count goes with one lease (an ordered batch's)"});
  auto r = c.client.ack(a.args[0], {a.args[1]}, static_cast<std::uint32_t>(count));
  if (!r) return fail(c, r.err());
  if (a.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  std::string acked = "-", remaining = "-";
  if (const auto* o = r.value().if_object()) {
    acked = field(*o, "acked");
    remaining = field(*o, "remaining");
  }
  c.out << "acked " << acked << " more of the batch of lease " << a.args[1] << " (batch_index 0 to "
        << count - 1 << " done); " << remaining << " still held under the lease\n";
  return exit_ok;
}

}  // namespace

int cmd_ack(command_context& c) {
  if (auto count = c.args.number("count")) return cmd_ack_count(c, *count);
  std::vector<std::string> leases(c.args.args.begin() + 1, c.args.args.end());
  auto r = c.client.ack(c.args.args[0], leases);
  if (!r) return fail(c, r.err());
  // A batch ack may list failed leases in its answer.
  const json::array* failed = nullptr;
  if (auto* o = r.value().if_object())
    if (auto* f = o->if_contains("failed")) failed = f->if_array();
  if (c.args.json) {
    print_json(c, r.value());
  } else {
    std::size_t bad = failed ? failed->size() : 0;
    c.out << "acked " << leases.size() - bad << " of " << leases.size()
          << (leases.size() == 1 ? " lease" : " leases") << "\n";
    if (failed)
      for (const auto& f : *failed) {
        if (!f.is_object()) continue;
        const auto& fo = f.as_object();
        c.err << "laneq: lease " << field(fo, "lease") << " not acked";
        if (auto* e = fo.if_contains("error"); e && e->is_object())
          c.err << ": " << field(e->as_object(), "code") << " (" << field(e->as_object(), "number")
                << "): " << field(e->as_object(), "message");
        c.err << "\n";
      }
  }
  return failed && !failed->empty() ? exit_server_error : exit_ok;
}

int cmd_nack(command_context& c) {
  const auto& a = c.args;
  bool dead = a.flag("dead-letter");
  std::int64_t retry = 0;
  if (auto n = a.number("retry-after-ms")) {
    if (dead) return usage(c, {"--retry-after-ms and --dead-letter exclude each other"});
    retry = *n;
  }
  std::optional<std::uint32_t> from;
  if (auto n = a.number("from")) from = static_cast<std::uint32_t>(*n);
  auto r = c.client.nack(a.args[0], a.args[1], retry, dead, from);
  if (!r) return fail(c, r.err());
  auto which = from ? "message " + std::to_string(*from) + " of the batch of lease "
                    : std::string{"the message of lease "};
  if (a.json)
    print_json(c, r.value());
  else if (dead)
    c.out << "dead-lettered " << which << a.args[1] << "\n";
  else
    c.out << "released " << which << a.args[1] << " for a retry in " << retry << " ms\n";
  if (!a.json && from && *from > 0)
    c.out << "  (batch_index 0 to " << *from - 1 << " acked; those after it wait behind it)\n";
  return exit_ok;
}

int cmd_extend(command_context& c) {
  auto n = c.args.number("lease-ms");
  if (!n) return usage(c, {"extend needs --lease-ms N"});
  auto r = c.client.extend(c.args.args[0], c.args.args[1], *n);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "extended lease " << c.args.args[1] << " by " << *n << " ms\n";
  return exit_ok;
}

}  // namespace laneq::cli
