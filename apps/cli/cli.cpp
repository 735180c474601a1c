// The `laneq` command line: parsing, the commands and the rendering of answers (see cli.hpp).
#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "laneq/limits.hpp"
#include "laneq/version.hpp"

namespace laneq::cli {

namespace json = boost::json;

int fail(command_context& c, const client::api_error& e) {
  c.err << "laneq: " << to_string(e) << "\n";
  if (e.message.rfind(client::certificate_verify_failed, 0) == 0)
    c.err << "laneq: to trust laneqd's certificate, pass its CA file with --cacert FILE (or "
             "LANEQ_CACERT); --insecure skips the check, for testing only\n";
  return exit_code_for(e);
}

int usage(command_context& c, const usage_error& e) {
  c.err << "laneq: " << e.message << "\n"
        << "usage: laneq " << c.args.command->words << " " << c.args.command->args << "   (laneq "
        << c.args.command->words << " --help)\n";
  return exit_usage;
}

namespace {

constexpr std::size_t any_count = SIZE_MAX;

void print_json(command_context& c, const json::value& v) {
  c.out << json::serialize(v) << "\n";
}

std::string text_of(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string().c_str(), v.as_string().size());
  if (v.is_null()) return "-";
  return json::serialize(v);
}

/// The array under `key`, or the first array member of an object, or the value itself.
const json::array* find_array(const json::value& v, std::string_view key) {
  if (auto* a = v.if_array()) return a;
  if (auto* o = v.if_object()) {
    if (auto* p = o->if_contains(key); p && p->is_array()) return &p->as_array();
    for (const auto& kv : *o)
      if (kv.value().is_array()) return &kv.value().as_array();
  }
  return nullptr;
}

std::string field(const json::object& o, std::string_view key) {
  auto* p = o.if_contains(key);
  return p == nullptr ? std::string("-") : text_of(*p);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A field's text for people: a point in time (is_time_field) as render_time shows it.
std::string shown(std::string_view key, const json::value& v) {
  if (is_time_field(key) && v.is_number())
    return render_time(v.to_number<std::int64_t>(), now_ms());
  return text_of(v);
}

/// A column's or a line's name: a point in time's without its `_ms`.
std::string label(std::string_view key) {
  return std::string(is_time_field(key) ? key.substr(0, key.size() - 3) : key);
}

/// A table: the columns that occur in the rows, in the preferred order, then any others.
std::string render_table(const json::array& rows, std::vector<std::string> preferred) {
  std::vector<std::string> cols;
  for (const auto& name : preferred) {
    bool present = std::any_of(rows.begin(), rows.end(), [&](const json::value& r) {
      return r.is_object() && r.as_object().contains(name);
    });
    if (present) cols.push_back(name);
  }
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (const auto& kv : r.as_object()) {
      std::string k(kv.key());
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    }
  }
  std::vector<std::vector<std::string>> cells;
  cells.emplace_back();
  for (const auto& c : cols) {
    std::string h = label(c);
    std::transform(h.begin(), h.end(), h.begin(), [](char ch) {
      return ch >= 'a' && ch <= 'z' ? static_cast<char>(ch - 'a' + 'A') : ch;
    });
    cells.back().push_back(h);
  }
  for (const auto& r : rows) {
    cells.emplace_back();
    for (const auto& c : cols) {
      const auto* x = r.is_object() ? r.as_object().if_contains(c) : &r;
      std::string v = x == nullptr ? "-" : shown(c, *x);
      v = one_line(v);
      if (v.size() > 60) v = v.substr(0, 57) + "...";
      cells.back().push_back(std::move(v));
    }
  }
  std::vector<std::size_t> width(cols.size(), 0);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

void render_tree_into(const json::value& v, int depth, std::string& out) {
  std::string pad(static_cast<std::size_t>(depth) * 2, ' ');
  if (auto* o = v.if_object()) {
    for (const auto& kv : *o) {
      const auto& x = kv.value();
      bool nested = (x.is_object() && !x.as_object().empty()) ||
                    (x.is_array() && !x.as_array().empty() &&
                     (x.as_array().front().is_object() || x.as_array().front().is_array()));
      if (nested) {
        out += pad + std::string(kv.key()) + ":\n";
        render_tree_into(x, depth + 1, out);
      } else {
        out += pad + label(kv.key()) + ": " + one_line(shown(kv.key(), x)) + "\n";
      }
    }
  } else if (auto* a = v.if_array()) {
    std::size_t i = 0;
    for (const auto& x : *a) {
      if (x.is_object() || x.is_array()) {
        out += pad + "- [" + std::to_string(i) + "]\n";
        render_tree_into(x, depth + 1, out);
      } else {
        out += pad + "- " + one_line(text_of(x)) + "\n";
      }
      ++i;
    }
  } else {
    out += pad + one_line(text_of(v)) + "\n";
  }
}

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

// -- the commands -------------------------------------------------------------------------------

int cmd_queue_create(command_context& c) {
  auto spec = spec_from_options(c.args);
  if (auto* e = std::get_if<usage_error>(&spec)) return usage(c, *e);
  const auto& name = c.args.args[0];
  json::value body = std::move(std::get<json::object>(spec));
  auto r = c.client.create_queue(name, body);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value().first);
  } else if (r.value().second) {
    c.out << "created queue " << name << "\n";
  } else {
    c.out << "queue " << name << " already exists with this spec (nothing changed)\n";
  }
  return exit_ok;
}

int cmd_queue_get(command_context& c) {
  auto r = c.client.get_queue(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_tree(r.value());
  return exit_ok;
}

int cmd_queue_list(command_context& c) {
  auto r = c.client.list_queues();
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_queue_list(r.value());
  return exit_ok;
}

int cmd_queue_delete(command_context& c) {
  auto r = c.client.delete_queue(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "deleted queue " << c.args.args[0] << "\n";
  return exit_ok;
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
  if (auto d = a.value("delay-ms")) {
    auto v = parse_int("--delay-ms", *d, 0, INT64_MAX / 1000);
    if (auto* e = std::get_if<usage_error>(&v)) return *e;
    proto.delay_ms = std::get<std::int64_t>(v);
  }
  outgoing_batch out;
  if (auto b = a.value("batch")) {
    auto v = parse_int("--batch", *b, 1, 100'000);
    if (auto* e = std::get_if<usage_error>(&v)) return *e;
    out.per_request = static_cast<std::size_t>(std::get<std::int64_t>(v));
  }
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

// -- topics (docs/api.md "Topics") --------------------------------------------------------------

/// `payments: by-customer, by-account` per topic of a topics listing (or of one topic's answer).
std::string render_topics(const json::value& answer) {
  std::vector<const json::object*> topics;
  if (const auto* list = find_array(answer, "topics")) {
    for (const auto& t : *list)
      if (t.is_object()) topics.push_back(&t.as_object());
  } else if (const auto* one = answer.if_object()) {
    topics.push_back(one);
  }
  if (topics.empty()) return "no topics\n";
  std::string out;
  for (const auto* t : topics) {
    out += field(*t, "name") + ":";
    const json::array* queues = nullptr;
    if (const auto* spec = t->if_contains("spec"); spec && spec->is_object())
      queues = find_array(*spec, "queues");
    for (std::size_t i = 0; queues && i < queues->size(); ++i)
      out += (i ? ", " : " ") + text_of((*queues)[i]);
    out += "\n";
  }
  return out;
}

int cmd_topic_create(command_context& c) {
  const auto& name = c.args.args[0];
  std::vector<std::string> queues(c.args.args.begin() + 1, c.args.args.end());
  auto r = c.client.create_topic(name, queues);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value().first);
  else if (r.value().second)
    c.out << "created topic " << name << "\n";
  else
    c.out << "topic " << name << " already exists with these queues (nothing changed)\n";
  return exit_ok;
}

int cmd_topic_list(command_context& c) {
  auto r = c.args.args.empty() ? c.client.list_topics() : c.client.get_topic(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << render_topics(r.value());
  return exit_ok;
}

int cmd_topic_delete(command_context& c) {
  auto r = c.client.delete_topic(c.args.args[0]);
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "deleted topic " << c.args.args[0] << " (its queues and their messages stay)\n";
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
  if (auto v = a.value("max")) {
    auto n = parse_int("--max", *v, 1, 100'000);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    p.max = static_cast<std::uint32_t>(std::get<std::int64_t>(n));
  }
  if (auto v = a.value("lease-ms")) {
    auto n = parse_int("--lease-ms", *v, 1, INT64_MAX / 1000);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    p.lease_ms = std::get<std::int64_t>(n);
  }
  if (auto v = a.value("wait-ms")) {
    auto n = parse_int("--wait-ms", *v, 0, INT64_MAX / 1000);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    p.wait_ms = std::get<std::int64_t>(n);
  }
  if (auto v = a.value("batch")) {
    auto n = parse_int("--batch", *v, 1, limits::ordered_batch_max);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    p.batch = static_cast<std::uint32_t>(std::get<std::int64_t>(n));
  }
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

/// `laneq ack QUEUE LEASE --count C`: an ordered batch's first C messages.
int cmd_ack_count(command_context& c, const std::string& text) {
  const auto& a = c.args;
  if (a.args.size() != 2) return usage(c, {"--count goes with one lease (an ordered batch's)"});
  auto n = parse_int("--count", text, 1, limits::ordered_batch_max);
  if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
  auto r =
      c.client.ack(a.args[0], {a.args[1]}, static_cast<std::uint32_t>(std::get<std::int64_t>(n)));
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
        << std::get<std::int64_t>(n) - 1 << " done); " << remaining
        << " still held under the lease\n";
  return exit_ok;
}

int cmd_ack(command_context& c) {
  if (auto count = c.args.value("count")) return cmd_ack_count(c, *count);
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
  if (auto v = a.value("retry-after-ms")) {
    if (dead) return usage(c, {"--retry-after-ms and --dead-letter exclude each other"});
    auto n = parse_int("--retry-after-ms", *v, 0, INT64_MAX / 1000);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    retry = std::get<std::int64_t>(n);
  }
  std::optional<std::uint32_t> from;
  if (auto v = a.value("from")) {
    auto n = parse_int("--from", *v, 0, limits::ordered_batch_max - 1);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    from = static_cast<std::uint32_t>(std::get<std::int64_t>(n));
  }
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
  auto v = c.args.value("lease-ms");
  if (!v) return usage(c, {"extend needs --lease-ms N"});
  auto n = parse_int("--lease-ms", *v, 1, INT64_MAX / 1000);
  if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
  auto r = c.client.extend(c.args.args[0], c.args.args[1], std::get<std::int64_t>(n));
  if (!r) return fail(c, r.err());
  if (c.args.json)
    print_json(c, r.value());
  else
    c.out << "extended lease " << c.args.args[1] << " by " << std::get<std::int64_t>(n) << " ms\n";
  return exit_ok;
}

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
  auto r = c.client.redrive(c.args.args[0], ids);
  if (!r) return fail(c, r.err());
  if (c.args.json) {
    print_json(c, r.value());
    return exit_ok;
  }
  std::string count;
  if (auto* o = r.value().if_object())
    if (auto* n = o->if_contains("redriven")) count = text_of(*n);
  c.out << "redrove "
        << (count.empty() ? (ids.empty() ? std::string("all") : std::to_string(ids.size())) : count)
        << " dead letters of " << c.args.args[0] << " back into the queue\n";
  return exit_ok;
}

int cmd_groups(command_context& c) {
  client::groups_params p;
  p.blocked_only = c.args.flag("blocked");
  if (auto v = c.args.value("limit")) {
    auto n = parse_int("--limit", *v, 1, limits::groups_page_max);
    if (auto* e = std::get_if<usage_error>(&n)) return usage(c, *e);
    p.limit = static_cast<std::uint32_t>(std::get<std::int64_t>(n));
  }
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

// -- option tables ------------------------------------------------------------------------------

option_spec opt(std::string_view name, bool value, std::string_view help, bool repeat = false) {
  return option_spec{name, value, repeat, help};
}

}  // namespace

int exit_code_for(const client::api_error& e) {
  switch (e.kind) {
    case client::failure_kind::unreachable: return exit_unreachable;
    case client::failure_kind::protocol: return exit_bad_answer;
    case client::failure_kind::usage: return exit_usage;
    case client::failure_kind::server: return exit_server_error;
  }
  return exit_server_error;
}

const std::vector<option_spec>& global_options() {
  static const std::vector<option_spec> g = {
      opt("url", true,
          "laneqd's address, http://HOST:PORT or https://HOST:PORT (env LANEQ_URL; default "
          "http://127.0.0.1:7070)"),
      opt("token", true, "bearer token (env LANEQ_TOKEN)"),
      opt("cacert", true,
          "https: trust the CA certificates in this PEM file (a self-signed laneqd's own "
          "certificate works too) instead of the system's (env LANEQ_CACERT)"),
      opt("insecure", false,
          "https: do not verify laneqd's certificate; for testing only (anyone on the path can "
          "read and change the traffic, the token too)"),
      opt("client-cert", true, "https: client certificate (PEM) for a laneqd that asks for one"),
      opt("client-key", true, "https: the client certificate's private key (PEM)"),
      opt("json", false, "print the server's JSON answer instead of text"),
      opt("timeout-ms", true, "per-request timeout (default 30000)"),
      opt("help", false, "show help"),
      opt("version", false, "print laneq's version and exit"),
  };
  return g;
}

// Long: one entry per command (words, arguments, help, options, handler); a table, not logic.
const std::vector<command_spec>& commands() {
  static const std::vector<command_spec> all = {
      {"queue create",
       "NAME",
       "create a queue (201), or confirm an identical one (200); a different ordering is a "
       "conflict",
       1,
       1,
       {opt("ordering", true, "none | queue | key (default none; key when --key is given)"),
        opt("key", true,
            "ordering key component: fairness_key, header:NAME, attribute:NAME or json:PATH "
            "(repeat for a compound key)",
            true),
        opt("when-key-missing", true, "reject | unordered | keyless_lane"),
        opt("lease-ms", true, "default lease of a delivery"),
        opt("max-attempts", true, "deliveries before a message is dead-lettered"),
        opt("throttle", true,
            "RATE[/BURST][@KEY,KEY...]: at most RATE deliveries/s per group of KEY (repeatable)",
            true),
        opt("durability", true, "delivery durability: fast | durable"),
        opt("spec", true, "the whole spec as JSON (the other options override its fields)"),
        opt("spec-file", true, "read the spec JSON from a file")},
       cmd_queue_create},
      {"queue get", "NAME", "show a queue's spec and stats", 1, 1, {}, cmd_queue_get},
      {"queue list", "", "list the queues", 0, 0, {}, cmd_queue_list},
      {"queue delete",
       "NAME",
       "delete a queue and every message in it",
       1,
       1,
       {},
       cmd_queue_delete},
      {"send",
       "QUEUE [BODY...]",
       "send messages (one per BODY, --file or stdin line); prints ids",
       1,
       any_count,
       {opt("header", true, "NAME=VALUE header on every message (repeatable)", true),
        opt("fairness-key", true, "fairness key of every message"),
        opt("delay-ms", true, "deliver no earlier than this many ms from now"),
        opt("file", true, "a message body from a file (bytes that are not UTF-8 go as base64)",
            true),
        opt("stdin-lines", false, "one message per line of standard input"),
        opt("base64", false, "the BODY arguments are base64 (sent as body_base64)"),
        opt("batch", true, "messages per request (default 100)"),
        opt("quiet", false, "print only the ids, one per line")},
       cmd_send},
      {"topic create",
       "NAME QUEUE...",
       "create a topic over existing queues (201), or confirm an identical one (200)",
       2,
       any_count,
       {},
       cmd_topic_create},
      {"topic list",
       "[NAME]",
       "list the topics and their queues (or one topic's)",
       0,
       1,
       {},
       cmd_topic_list},
      {"topic delete",
       "NAME",
       "delete a topic (its queues and their messages stay)",
       1,
       1,
       {},
       cmd_topic_delete},
      {"topic publish",
       "TOPIC [BODY...]",
       "publish messages into every queue of a topic, all or nothing per request; prints the ids "
       "per queue",
       1,
       any_count,
       {opt("header", true, "NAME=VALUE header on every message (repeatable)", true),
        opt("fairness-key", true, "fairness key of every message"),
        opt("delay-ms", true, "deliver no earlier than this many ms from now"),
        opt("file", true, "a message body from a file (bytes that are not UTF-8 go as base64)",
            true),
        opt("stdin-lines", false, "one message per line of standard input"),
        opt("base64", false, "the BODY arguments are base64 (sent as body_base64)"),
        opt("batch", true, "messages per request (default 100)")},
       cmd_topic_publish},
      {"receive",
       "QUEUE",
       "take messages under a lease",
       1,
       1,
       {opt("max", true, "up to this many messages (default 1)"),
        opt("lease-ms", true, "lease length (default: the queue's)"),
        opt("wait-ms", true, "long-poll this long for the first message (default 0)"),
        opt("batch", true,
            "up to this many consecutive messages of one ordering group under one lease, an "
            "ordered batch (1 to 100, default 1; --max still bounds the whole answer)"),
        opt("quiet", false,
            "one line per message: LEASE<TAB>ORDERING_KEY<TAB>BODY (a batch's messages share a "
            "lease, in batch order)")},
       cmd_receive},
      {"ack",
       "QUEUE LEASE...",
       "acknowledge delivered messages (removes them; a batch's lease acks its whole batch)",
       2,
       any_count,
       {opt("count", true,
            "with one batch lease: ack only its first C messages (batch_index below C, as "
            "delivered); the lease goes on over the rest")},
       cmd_ack},
      {"nack",
       "QUEUE LEASE",
       "give a message back: retry after a pause (its group waits) or dead-letter it",
       2,
       2,
       {opt("retry-after-ms", true, "retry no earlier than this (default 0)"),
        opt("dead-letter", false, "move the message to the dead-letter list now"),
        opt("from", true,
            "with a batch lease: the batch_index of the message that failed; those before it are "
            "acked, those after it go back behind it (default: the first not acked)")},
       cmd_nack},
      {"extend",
       "QUEUE LEASE",
       "extend a lease",
       2,
       2,
       {opt("lease-ms", true, "the new lease length from now (required)")},
       cmd_extend},
      {"dlq list", "QUEUE", "list a queue's dead letters", 1, 1, {}, cmd_dlq_list},
      {"dlq redrive",
       "QUEUE [ID...]",
       "put dead letters back (all when no ID is given)",
       1,
       any_count,
       {},
       cmd_dlq_redrive},
      {"groups",
       "QUEUE",
       "list a queue's ordering groups and what each waits for",
       1,
       1,
       {opt("blocked", false, "only groups that cannot deliver now (in flight, retry wait, ...)"),
        opt("limit", true, "groups per page, 1 to 10000 (default 1000)"),
        opt("cursor", true, "the page after this cursor (printed after the previous page)")},
       cmd_groups},
      {"stats",
       "[QUEUE...]",
       "counters and gauges of the given queues (default: every queue), one row each",
       0,
       any_count,
       {opt("wide", false, "every counter and gauge, not only the main ones")},
       cmd_stats},
      {"consume",
       "QUEUE -- CMD [ARG...]",
       "run CMD once per message, one at a time: the body on its standard input, the message's "
       "fields in LANEQ_* variables (LANEQ_MESSAGE_ID, LANEQ_LEASE, LANEQ_ATTEMPT, "
       "LANEQ_ORDERING_KEY, LANEQ_FAIRNESS_KEY, LANEQ_ENQUEUED_AT_MS, LANEQ_HEADER_<NAME>); "
       "exit 0 acks, an exit code given with --dead-letter-on dead-letters, anything else gives "
       "the message back for a retry; the lease is extended while CMD runs; SIGINT or SIGTERM "
       "stop after the message in hand",
       2,
       any_count,
       {opt("lease-ms", true, "lease of each message (default: the queue's)"),
        opt("wait-ms", true, "long-poll for the next message this long, 0 to 20000 (default 5000)"),
        opt("retry-after-ms", true, "a failed message's retry waits this long (default 0)"),
        opt("dead-letter-on", true, "an exit code (1 to 255) that dead-letters (repeatable)", true),
        opt("max-messages", true, "stop after this many messages"),
        opt("until-empty", false, "stop when a receive finds no message")},
       cmd_consume},
      {"health", "", "check that laneqd is up (GET /healthz)", 0, 0, {}, cmd_health},
      {"metrics", "", "print laneqd's Prometheus metrics", 0, 0, {}, cmd_metrics},
      {"backup",
       "DIR",
       "online backup: laneqd writes a checkpoint of its store into DIR (an absolute path on the "
       "laneqd host that does not exist yet; admin token)",
       1,
       1,
       {},
       cmd_backup},
  };
  return all;
}

bool parsed::flag(std::string_view name) const {
  auto it = flags.find(std::string(name));
  return it != flags.end() && it->second;
}

std::optional<std::string> parsed::value(std::string_view name) const {
  auto it = values.find(std::string(name));
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> parsed::all(std::string_view name) const {
  auto it = values.find(std::string(name));
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

std::variant<std::int64_t, usage_error> parse_int(std::string_view option, std::string_view text,
                                                  std::int64_t min, std::int64_t max) {
  auto bad = [&](std::string why) {
    return usage_error{std::string(option) + " wants " + why + ", got \"" + std::string(text) +
                       "\""};
  };
  if (text.empty()) return bad("a number");
  bool neg = text.front() == '-';
  auto digits = neg ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 18) return bad("a number");
  std::int64_t v = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return bad("a whole number");
    v = v * 10 + (ch - '0');
  }
  if (neg) v = -v;
  if (v < min || v > max)
    return bad("a number from " + std::to_string(min) + " to " + std::to_string(max));
  return v;
}

std::variant<json::object, usage_error> parse_key_component(std::string_view text) {
  if (text == "fairness_key" || text == "fairness-key") return json::object{{"fairness_key", true}};
  auto colon = text.find(':');
  if (colon != std::string_view::npos && colon + 1 < text.size()) {
    auto kind = text.substr(0, colon);
    auto name = text.substr(colon + 1);
    if (kind == "header" || kind == "attribute" || kind == "json")
      return json::object{{kind, name}};
  }
  return usage_error{"bad key component \"" + std::string(text) +
                     "\": use fairness_key, header:NAME, attribute:NAME or json:PATH"};
}

namespace {

/// Appends key component `text` to `key`, or says why it is not one.
std::optional<usage_error> add_key_component(std::string_view text, json::array& key) {
  auto c = parse_key_component(text);
  if (auto* e = std::get_if<usage_error>(&c)) return *e;
  key.emplace_back(std::move(std::get<json::object>(c)));
  return std::nullopt;
}

/// The spec given whole with --spec or --spec-file, or an empty object when neither is given.
std::variant<json::object, usage_error> base_spec(const parsed& p) {
  json::object spec;
  auto base_text = p.value("spec");
  if (auto file = p.value("spec-file")) {
    if (base_text) return usage_error{"give --spec or --spec-file, not both"};
    std::ifstream f(*file);
    if (!f) return usage_error{"--spec-file: cannot read \"" + *file + "\""};
    base_text = std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  if (base_text) {
    json::error_code ec;
    auto v = json::parse(*base_text, ec);
    if (ec) return usage_error{"the spec is not valid JSON (" + ec.message() + ")"};
    if (!v.is_object()) return usage_error{"the spec must be a JSON object"};
    spec = std::move(v.as_object());
  }
  return spec;
}

/// Checks --ordering, --key and --when-key-missing and merges them into the spec's "ordering".
std::optional<usage_error> add_ordering(const parsed& p, json::object& spec) {
  auto keys = p.all("key");
  auto mode = p.value("ordering");
  if (mode && *mode != "none" && *mode != "queue" && *mode != "key")
    return usage_error{"--ordering wants none, queue or key, got \"" + *mode + "\""};
  if (!keys.empty() && mode && *mode != "key")
    return usage_error{"--key needs --ordering key (got --ordering " + *mode + ")"};
  if (mode && *mode == "key" && keys.empty() && !spec.contains("ordering"))
    return usage_error{"--ordering key needs at least one --key"};
  auto missing = p.value("when-key-missing");
  if (missing && *missing != "reject" && *missing != "unordered" && *missing != "keyless_lane")
    return usage_error{"--when-key-missing wants reject, unordered or keyless_lane, got \"" +
                       *missing + "\""};
  if (!mode && keys.empty() && !missing) return std::nullopt;
  json::object ordering;
  if (auto* o = spec.if_contains("ordering"); o && o->is_object()) ordering = o->as_object();
  if (mode)
    ordering["mode"] = *mode;
  else if (!keys.empty())
    ordering["mode"] = "key";
  if (!keys.empty()) {
    json::array key;
    for (const auto& k : keys)
      if (auto e = add_key_component(k, key)) return *e;
    ordering["key"] = std::move(key);
  }
  if (missing) ordering["when_key_missing"] = *missing;
  spec["ordering"] = std::move(ordering);
  return std::nullopt;
}

/// Sets spec[field] from integer option --`option` (1 to `max`) when it is given.
std::optional<usage_error> add_int_field(const parsed& p, std::string_view option,
                                         std::string_view field, std::int64_t max,
                                         json::object& spec) {
  auto v = p.value(option);
  if (!v) return std::nullopt;
  auto n = parse_int("--" + std::string(option), *v, 1, max);
  if (auto* e = std::get_if<usage_error>(&n)) return *e;
  spec[field] = std::get<std::int64_t>(n);
  return std::nullopt;
}

/// One --throttle value, RATE[/BURST][@KEY,KEY...], as a spec throttle object.
std::variant<json::object, usage_error> parse_throttle(std::string_view text) {
  auto at = text.find('@');
  auto rate_part = text.substr(0, at);
  auto slash = rate_part.find('/');
  auto rate = parse_int("--throttle rate", rate_part.substr(0, slash), 1, UINT32_MAX);
  if (auto* e = std::get_if<usage_error>(&rate)) return *e;
  json::object th;
  json::array key;
  if (at != std::string_view::npos) {
    auto rest = text.substr(at + 1);
    while (!rest.empty()) {
      auto comma = rest.find(',');
      if (auto e = add_key_component(rest.substr(0, comma), key)) return *e;
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  th["key"] = std::move(key);
  th["rate_per_s"] = std::get<std::int64_t>(rate);
  if (slash != std::string_view::npos) {
    auto burst = parse_int("--throttle burst", rate_part.substr(slash + 1), 1, UINT32_MAX);
    if (auto* e = std::get_if<usage_error>(&burst)) return *e;
    th["burst"] = std::get<std::int64_t>(burst);
  }
  return th;
}

/// Sets spec["throttles"] from the --throttle options when any is given.
std::optional<usage_error> add_throttles(const parsed& p, json::object& spec) {
  auto throttles = p.all("throttle");
  if (throttles.empty()) return std::nullopt;
  json::array arr;
  for (const auto& t : throttles) {
    auto th = parse_throttle(t);
    if (auto* e = std::get_if<usage_error>(&th)) return *e;
    arr.emplace_back(std::move(std::get<json::object>(th)));
  }
  spec["throttles"] = std::move(arr);
  return std::nullopt;
}

}  // namespace

std::variant<json::object, usage_error> spec_from_options(const parsed& p) {
  auto base = base_spec(p);
  if (auto* e = std::get_if<usage_error>(&base)) return *e;
  json::object spec = std::move(std::get<json::object>(base));
  if (auto e = add_ordering(p, spec)) return *e;
  if (auto e = add_int_field(p, "lease-ms", "lease_ms", INT64_MAX / 1000, spec)) return *e;
  if (auto e = add_int_field(p, "max-attempts", "max_attempts", UINT32_MAX, spec)) return *e;
  if (auto e = add_throttles(p, spec)) return *e;
  if (auto v = p.value("durability")) {
    if (*v != "fast" && *v != "durable")
      return usage_error{"--durability wants fast or durable, got \"" + *v + "\""};
    spec["delivery_durability"] = *v;
  }
  return spec;
}

namespace {

/// The option called `name` in `list`, or null.
const option_spec* find_option(const std::vector<option_spec>& list, std::string_view name) {
  for (const auto& o : list)
    if (o.name == name) return &o;
  return nullptr;
}

/// The positions of the first two tokens that are neither options nor a global option's value.
std::vector<std::size_t> leading_words(const std::vector<std::string>& argv) {
  const auto& globals = global_options();
  std::vector<std::size_t> plain;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const auto& a = argv[i];
    if (a == "--") break;
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      auto name = std::string_view(a).substr(2);
      if (name.find('=') != std::string_view::npos) continue;
      auto* g = find_option(globals, name);
      if (g != nullptr && g->takes_value) ++i;  // skip the global's value
      continue;
    }
    if (a == "-h" || a == "-q") continue;
    plain.push_back(i);
    if (plain.size() == 2) break;
  }
  return plain;
}

/// The command the leading words name (two-word commands win), or null; `used`: words it takes.
const command_spec* match_command(const std::vector<std::string>& argv,
                                  const std::vector<std::size_t>& plain, std::size_t& used) {
  const command_spec* cmd = nullptr;
  used = 0;
  for (const auto& c : commands()) {
    auto words = c.words;
    auto space = words.find(' ');
    if (space == std::string_view::npos) {
      if (!plain.empty() && argv[plain[0]] == words && used < 1) {
        cmd = &c;
        used = 1;
      }
    } else if (plain.size() >= 2 && argv[plain[0]] == words.substr(0, space) &&
               argv[plain[1]] == words.substr(space + 1)) {
      cmd = &c;
      used = 2;
    }
  }
  return cmd;
}

/// `laneq help queue create`: the command named by the words after `help` (at `help_pos`), or null.
const command_spec* help_topic(const std::vector<std::string>& argv, std::size_t help_pos) {
  std::string words;
  for (std::size_t i = help_pos + 1; i < argv.size(); ++i) {
    if (argv[i].rfind("-", 0) == 0) continue;
    words += (words.empty() ? "" : " ") + argv[i];
  }
  const command_spec* topic = nullptr;
  for (const auto& c : commands())
    if (c.words == words) topic = &c;
  return topic;
}

/// Levenshtein distance: single-byte insertions, deletions and substitutions.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      auto above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// ` (did you mean "W"?)` for the command whose words are nearest `typed`, when one is within two
/// edits (and closer than the length of what was typed); empty otherwise.
std::string did_you_mean(std::string_view typed) {
  std::string_view best;
  auto best_distance = std::min<std::size_t>(3, typed.size());
  for (const auto& c : commands())
    if (auto d = edit_distance(typed, c.words); d < best_distance) {
      best = c.words;
      best_distance = d;
    }
  return best.empty() ? std::string{} : " (did you mean \"" + std::string{best} + "\"?)";
}

/// The error for leading words that name no command; none for `laneq queue --help` (help wanted).
std::optional<usage_error> unknown_command(const std::vector<std::string>& argv,
                                           const std::vector<std::size_t>& plain) {
  const auto& first = argv[plain[0]];
  bool group = first == "queue" || first == "dlq" || first == "topic";
  if (!group)
    return usage_error{"unknown command \"" + first + "\"" + did_you_mean(first) +
                       " (laneq --help lists the commands)"};
  // `laneq queue` alone or with a bad sub-command.
  std::string sub = plain.size() >= 2 ? argv[plain[1]] : std::string();
  if (!sub.empty())
    return usage_error{"unknown command \"" + first + " " + sub + "\"" +
                       did_you_mean(first + " " + sub) + " (laneq --help lists them)"};
  bool asks_help = std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
                   std::find(argv.begin(), argv.end(), "-h") != argv.end();
  if (asks_help) return std::nullopt;
  return usage_error{"\"" + first + "\" needs a sub-command (laneq --help lists them)"};
}

/// The tokens the command words take: its `used` words, or with help every non-option after them.
std::vector<bool> command_tokens(const std::vector<std::string>& argv,
                                 const std::vector<std::size_t>& plain, std::size_t used,
                                 bool help) {
  std::vector<bool> skip(argv.size(), false);
  if (!help)
    for (std::size_t k = 0; k < used; ++k) skip[plain[k]] = true;
  else if (!plain.empty())
    for (std::size_t i = plain[0]; i < argv.size(); ++i)
      if (argv[i].rfind("-", 0) != 0) skip[i] = true;
  return skip;
}

/// Applies global option --`name` (its value already taken) to `p`.
std::optional<usage_error> apply_global(parsed& p, const std::string& name,
                                        const std::string& value) {
  if (name == "url")
    p.url = value;
  else if (name == "token")
    p.token = value;
  else if (name == "cacert")
    p.cacert = value;
  else if (name == "insecure")
    p.insecure = true;
  else if (name == "client-cert")
    p.cert = value;
  else if (name == "client-key")
    p.key = value;
  else if (name == "json")
    p.json = true;
  else if (name == "help")
    p.help = true;
  else if (name == "version")
    p.version = true;
  else if (name == "timeout-ms") {
    auto n = parse_int("--timeout-ms", value, 1, 3'600'000);
    if (auto* e = std::get_if<usage_error>(&n)) return *e;
    p.timeout_ms = std::get<std::int64_t>(n);
  }
  return std::nullopt;
}

/// Takes the `--name[=VALUE]` token at argv[i] (and its VALUE token: `i` moves onto it) into `p`.
std::optional<usage_error> take_long_option(const std::vector<std::string>& argv, std::size_t& i,
                                            parsed& p) {
  std::string name = argv[i].substr(2);
  std::optional<std::string> inline_value;
  if (auto eq = name.find('='); eq != std::string::npos) {
    inline_value = name.substr(eq + 1);
    name.resize(eq);
  }
  const option_spec* o = find_option(global_options(), name);
  bool global = o != nullptr;
  if (o == nullptr && p.command != nullptr) o = find_option(p.command->options, name);
  if (o == nullptr) {
    if (p.help) return std::nullopt;
    return usage_error{"unknown option --" + name +
                       (p.command ? " for \"" + std::string(p.command->words) + "\"" : "") +
                       " (see --help)"};
  }
  std::string value;
  if (o->takes_value) {
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      return usage_error{"option --" + name + " needs a value"};
    }
  } else if (inline_value) {
    return usage_error{"option --" + name + " takes no value"};
  }
  if (global) return apply_global(p, name, value);
  if (o->takes_value) {
    auto& vals = p.values[name];
    if (!vals.empty() && !o->repeatable) return usage_error{"option --" + name + " given twice"};
    vals.push_back(value);
  } else {
    p.flags[name] = true;
  }
  return std::nullopt;
}

/// Reads every token not in `skip` into `p`: options, -h, -q, `--` and the arguments.
std::optional<usage_error> take_tokens(const std::vector<std::string>& argv,
                                       const std::vector<bool>& skip, parsed& p) {
  bool only_args = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (skip[i]) continue;
    const auto& a = argv[i];
    if (only_args) {
      p.args.push_back(a);
      continue;
    }
    if (a == "--") {
      only_args = true;
      continue;
    }
    if (a == "-h") {
      p.help = true;
      continue;
    }
    if (a == "-q") {
      p.flags["quiet"] = true;
      continue;
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      if (auto e = take_long_option(argv, i, p)) return e;
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9'))
      return usage_error{"unknown option " + a + " (options are spelled --name)"};
    p.args.push_back(a);
  }
  return std::nullopt;
}

/// The error for a command given too few or too many arguments, if it was.
std::optional<usage_error> check_arg_count(const command_spec& c, std::size_t given) {
  if (given >= c.min_args && given <= c.max_args) return std::nullopt;
  std::string want = c.min_args == c.max_args ? std::to_string(c.min_args)
                     : c.max_args == any_count
                         ? "at least " + std::to_string(c.min_args)
                         : std::to_string(c.min_args) + " to " + std::to_string(c.max_args);
  return usage_error{"\"" + std::string(c.words) + "\" takes " + want + " argument(s) (" +
                     std::string(c.args) + "), got " + std::to_string(given) + "; usage: laneq " +
                     std::string(c.words) + " " + std::string(c.args)};
}

}  // namespace

std::variant<parsed, usage_error> parse(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env) {
  parsed p;
  if (auto it = env.find("LANEQ_URL"); it != env.end() && !it->second.empty()) p.url = it->second;
  if (auto it = env.find("LANEQ_TOKEN"); it != env.end()) p.token = it->second;
  if (auto it = env.find("LANEQ_CACERT"); it != env.end()) p.cacert = it->second;
  // Find the command: the longest run of leading words (options skipped) naming one.
  auto plain = leading_words(argv);
  std::size_t used = 0;
  const command_spec* cmd = match_command(argv, plain, used);
  if (plain.empty() || argv[plain[0]] == "help") {
    p.help = true;
    if (!plain.empty()) p.command = help_topic(argv, plain[0]);
  } else if (cmd == nullptr) {
    if (auto e = unknown_command(argv, plain)) return *e;
    p.help = true;
    return p;
  } else {
    p.command = cmd;
  }
  if (auto e = take_tokens(argv, command_tokens(argv, plain, used, p.help), p)) return *e;
  if (p.help || p.command == nullptr) return p;
  if (auto e = check_arg_count(*p.command, p.args.size())) return *e;
  return p;
}

// -- rendering ----------------------------------------------------------------------------------

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          out += "\\x";
          out += hex[(ch >> 4) & 15];
          out += hex[ch & 15];
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string render_help(const command_spec* command) {
  std::ostringstream o;
  auto options = [&](const std::vector<option_spec>& list) {
    for (const auto& op : list) {
      std::string left = "  --" + std::string(op.name) + (op.takes_value ? " VALUE" : "");
      if (left.size() < 26) left.resize(26, ' ');
      o << left << " " << op.help << "\n";
    }
  };
  if (command != nullptr) {
    o << "usage: laneq " << command->words << (command->args.empty() ? "" : " ") << command->args
      << " [options]\n\n"
      << command->summary << "\n";
    if (!command->options.empty()) {
      o << "\noptions:\n";
      options(command->options);
    }
    o << "\nglobal options:\n";
    options(global_options());
    return o.str();
  }
  o << "laneq: the command line of the laneq message queue (talks to laneqd over HTTP)\n\n"
    << "usage: laneq [global options] COMMAND [args] [options]\n\ncommands:\n";
  for (const auto& c : commands()) {
    std::string left = "  " + std::string(c.words) + " " + std::string(c.args);
    if (left.size() < 32) left.resize(32, ' ');
    o << left << " " << c.summary << "\n";
  }
  o << "\nglobal options:\n";
  options(global_options());
  o << "\nexit codes: 0 ok, 1 laneqd answered with an error, 2 usage error, 3 laneqd unreachable,\n"
    << "4 an answer that is not the API's shape. `laneq COMMAND --help` shows a command's "
       "options.\n";
  return o.str();
}

std::string render_messages(const json::value& answer) {
  const json::array* msgs = find_array(answer, "messages");
  if (msgs == nullptr || msgs->empty()) return "no messages\n";
  std::map<std::string, int> per_lease;  // a lease held by several messages is an ordered batch's
  for (const auto& m : *msgs)
    if (m.is_object()) ++per_lease[field(m.as_object(), "lease")];
  std::string out;
  for (const auto& m : *msgs) {
    if (!m.is_object()) continue;
    const auto& o = m.as_object();
    out += "message " + field(o, "id") + "  attempt " + field(o, "attempt");
    if (o.contains("batch_index") &&
        (per_lease[field(o, "lease")] > 1 || field(o, "batch_index") != "0"))
      out += "  batch_index " + field(o, "batch_index");
    if (auto* k = o.if_contains("ordering_key"); k && k->is_string() && !k->as_string().empty())
      out += "  key " + one_line(text_of(*k));
    if (auto* f = o.if_contains("fairness_key"); f && f->is_string() && !f->as_string().empty())
      out += "  fairness " + one_line(text_of(*f));
    out += "\n  lease: " + field(o, "lease") + "\n";
    if (auto* b = o.if_contains("body"))
      out += "  body: " + one_line(text_of(*b)) + "\n";
    else if (auto* b64 = o.if_contains("body_base64"))
      out += "  body (base64): " + text_of(*b64) + "\n";
    if (auto* h = o.if_contains("headers"); h && h->is_object() && !h->as_object().empty()) {
      out += "  headers:";
      for (const auto& kv : h->as_object())
        out += " " + std::string(kv.key()) + "=" + one_line(text_of(kv.value()));
      out += "\n";
    }
  }
  return out;
}

std::string render_messages_quiet(const json::value& answer) {
  const json::array* msgs = find_array(answer, "messages");
  std::string out;
  if (msgs == nullptr) return out;
  for (const auto& m : *msgs) {
    if (!m.is_object()) continue;
    const auto& o = m.as_object();
    std::string body;
    if (auto* b = o.if_contains("body"))
      body = text_of(*b);
    else if (auto* b64 = o.if_contains("body_base64"))
      body = text_of(*b64);
    std::string key;
    if (auto* k = o.if_contains("ordering_key"); k && k->is_string()) key = text_of(*k);
    out +=
        field(o, "lease") + "\t" + one_line(key.empty() ? "-" : key) + "\t" + one_line(body) + "\n";
  }
  return out;
}

std::string render_groups(const json::value& answer) {
  const json::array* groups = find_array(answer, "groups");
  std::string out =
      groups == nullptr || groups->empty()
          ? "no groups\n"
          : render_table(*groups, {"key", "state", "backlog", "head", "since", "until"});
  if (const auto* o = answer.if_object())
    if (const auto* next = o->if_contains("next_cursor"))
      out += "more groups: --cursor " + text_of(*next) + "\n";
  return out;
}

std::string render_dead_letters(const json::value& answer) {
  const json::array* dl = find_array(answer, "dead_letters");
  if (dl == nullptr || dl->empty()) return "no dead letters\n";
  return render_table(*dl, {"id", "reason", "attempts", "attempt", "ordering_key", "body"});
}

std::string render_tree(const json::value& v) {
  std::string out;
  render_tree_into(v, 0, out);
  return out;
}

bool is_time_field(std::string_view key) {
  return key.ends_with("_at_ms") || key.ends_with("_deadline_ms") || key == "at_ms" ||
         key == "since_ms" || key == "until_ms";
}

std::string render_time(std::int64_t unix_ms, std::int64_t now) {
  if (unix_ms <= 0) return "-";
  auto secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char text[40];
  auto n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  auto delta = unix_ms - now;
  auto away = delta < 0 ? -delta : delta;
  if (away < 1000) return std::string(text) + " (now)";
  struct unit {
    std::int64_t ms;
    const char* name;
  };
  static constexpr unit units[] = {{86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  std::string amount;
  for (const auto& u : units)
    if (away >= u.ms || u.ms == 1000) {
      amount = std::to_string(away / u.ms) + u.name;
      break;
    }
  return std::string(text) + (delta > 0 ? " (in " + amount + ")" : " (" + amount + " ago)");
}

std::string render_stats(const json::object& by_queue, bool wide) {
  static const std::vector<std::string> main = {
      "queue",     "backlog", "in_flight", "dead_letters",  "live_groups",  "enqueued",
      "delivered", "acked",   "nacked",    "lease_expired", "dead_lettered"};
  json::array rows;
  for (const auto& [name, stats] : by_queue) {
    json::object row{{"queue", name}};
    if (const auto* o = stats.if_object())
      for (const auto& [key, value] : *o) {
        bool keep = wide ? !value.is_array() && !value.is_object()
                         : std::find(main.begin(), main.end(), key) != main.end();
        if (keep) row[key] = value;
      }
    rows.push_back(std::move(row));
  }
  return render_table(rows, main);
}

std::string render_queue_list(const json::value& answer) {
  const json::array* qs = find_array(answer, "queues");
  if (qs == nullptr || qs->empty()) return "no queues\n";
  std::string out;
  for (const auto& q : *qs) {
    if (q.is_object() && q.as_object().contains("name"))
      out += text_of(q.as_object().at("name")) + "\n";
    else
      out += text_of(q) + "\n";
  }
  return out;
}

int run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        std::ostream& out, std::ostream& err, std::istream& in) {
  auto r = parse(argv, env);
  if (auto* e = std::get_if<usage_error>(&r)) {
    err << "laneq: " << e->message << "\n";
    return exit_usage;
  }
  auto& p = std::get<parsed>(r);
  if (p.version) {
    out << "laneq " << laneq::version_string << "\n";
    return exit_ok;
  }
  if (p.help || p.command == nullptr) {
    out << render_help(p.command);
    return exit_ok;
  }
  auto ep = client::parse_url(p.url);
  if (!ep) {
    err << "laneq: " << to_string(ep.err()) << "\n";
    return exit_usage;
  }
  if (!ep.value().tls && (p.insecure || !p.cacert.empty() || !p.cert.empty())) {
    err << "laneq: --cacert, --insecure and --client-cert are for https:// URLs, not " << p.url
        << "\n";
    return exit_usage;
  }
  client::client_options opts;
  opts.token = p.token;
  opts.timeout = std::chrono::milliseconds(p.timeout_ms);
  opts.cacert_file = p.cacert;
  opts.insecure = p.insecure;
  opts.cert_file = p.cert;
  opts.key_file = p.key;
  client::http_client c(ep.value(), opts);
  command_context ctx{p, c, out, err, in};
  return p.command->run(ctx);
}

}  // namespace laneq::cli
