// The kill -9 test's journal and checker (checker.hpp; RELIABILITY.md T3).
#include "checker.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "kill9_setup.hpp"

namespace laneq::kill9 {

std::uint64_t journal::record(event e) {
  std::lock_guard<std::mutex> guard{mu_};
  e.seq = events_.size() + 1;
  events_.push_back(std::move(e));
  return events_.back().seq;
}

std::vector<event> journal::events() const {
  std::lock_guard<std::mutex> guard{mu_};
  return events_;
}

namespace {

constexpr std::size_t findings_per_kind_max = 5;

/// What we sent under one body.
struct sent {
  bool acknowledged = false;
  message_id id;       ///< the acknowledged id
  message_id seen_id;  ///< unknown outcome: the id it was first delivered with
  bool delivered = false;
  bool confirmed = false;
};

/// One message id's delivery history.
struct message_state {
  bool delivered = false;
  lease_token latest;               ///< its latest delivery's lease
  std::uint64_t confirmed_seq = 0;  ///< journal position of the first confirmed ack (0: none)
};

/// A lease our consumers held.
struct held_lease {
  lease_token lease;
  std::int64_t deadline_us = 0;
  std::uint32_t incarnation = 0;
  std::uint64_t n = 0;
};

/// One ordering key of one queue.
struct key_state {
  std::set<std::uint64_t> unreleased;  ///< acknowledged-enqueued n's not released
  std::vector<held_lease> held;
  std::map<std::uint32_t, std::uint64_t> max_n_in_run;  ///< highest n delivered per broker run
  std::map<std::uint32_t, std::set<std::uint64_t>> flagged_in_run;  ///< n's already reported
};

enum class outcome : std::uint8_t { ok, failed, unknown };

using lease_tuple = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::uint64_t>;
lease_tuple lease_key(const lease_token& l) {
  return {l.group.value, l.msg.value, l.attempt, l.nonce};
}

class replay {
 public:
  replay(const std::vector<event>& events, const checker_options& opts)
      : events_(events), opts_(opts) {}

  check_report run() {
    collect();
    for (const auto& e : events_) {
      switch (e.kind) {
        case event_kind::deliver: on_deliver(e); break;
        case event_kind::ack_sent: on_ack_sent(e); break;
        case event_kind::ack_ok: on_ack_ok(e); break;
        default: break;
      }
    }
    for (auto& [where, s] : sent_) {
      if (!s.acknowledged) continue;
      if (!s.delivered) {
        ++r_.lost;
        note(lost_notes_, "lost: " + where.first + " '" + where.second + "' (id " +
                              std::to_string(s.id.value) + ") was never delivered");
      }
    }
    return std::move(r_);
  }

 private:
  const queue_traits* traits(const std::string& queue) const {
    for (const auto& q : opts_.queues)
      if (q.name == queue) return &q;
    return nullptr;
  }

  /// The key and number a delivery or ack stands for: from its body, or, when the body is not
  /// one we sent (a corrupted delivery), from the body its id was acknowledged with, so one
  /// corrupted message is reported once (unexpected, and lost) rather than as a cascade of
  /// order violations behind it.
  std::optional<parsed_body> resolve(const std::string& queue, const std::string& body,
                                     message_id id) const {
    if (sent_.contains({queue, body})) return parse_body(body);
    if (auto it = bodies_.find({queue, id.value}); it != bodies_.end())
      return parse_body(it->second);
    return parse_body(body);
  }

  void note(std::size_t& count, std::string line) {
    if (count++ < findings_per_kind_max) r_.findings.push_back(std::move(line));
  }

  /// Pass 1: what was sent and how each ack ended.
  void collect() {
    for (const auto& e : events_) {
      switch (e.kind) {
        case event_kind::restart:
          ++r_.restarts;
          starts_[e.incarnation] = e.start_us;
          break;
        case event_kind::ack_sent: acked_leases_.insert(lease_key(e.lease)); break;
        case event_kind::enqueue_ok: {
          auto& s = sent_[{e.queue, e.body}];
          s.acknowledged = true;
          s.id = e.id;
          ++r_.acknowledged;
          bodies_[{e.queue, e.id.value}] = e.body;
          if (auto* t = traits(e.queue); t && t->ordered)
            if (auto p = parse_body(e.body)) keys_[{e.queue, p->key}].unreleased.insert(p->n);
          break;
        }
        case event_kind::enqueue_unknown:
          sent_.try_emplace({e.queue, e.body});
          ++r_.unknown_enqueues;
          break;
        case event_kind::ack_ok: outcomes_[e.request] = outcome::ok; break;
        case event_kind::ack_failed:
          outcomes_[e.request] = outcome::failed;
          ++r_.acks_failed;
          break;
        case event_kind::ack_unknown:
          outcomes_[e.request] = outcome::unknown;
          ++r_.acks_unknown;
          break;
        default: break;
      }
    }
  }

  void on_deliver(const event& e) {
    ++r_.deliveries;
    auto where = std::make_pair(e.queue, e.body);
    auto it = sent_.find(where);
    if (it == sent_.end() || !parse_body(e.body)) {
      ++r_.unexpected;
      auto acked_as = bodies_.find({e.queue, e.id.value});
      note(unexpected_notes_,
           "unexpected: " + e.queue + " delivered '" + e.body + "' (id " +
               std::to_string(e.id.value) + ", attempt " + std::to_string(e.lease.attempt) +
               ", run " + std::to_string(e.incarnation) + "), which we never enqueued" +
               (acked_as == bodies_.end()
                    ? std::string{}
                    : "; that id was acknowledged for '" + acked_as->second + "'"));
    } else {
      auto& s = it->second;
      if (s.acknowledged && s.id != e.id) {
        ++r_.unexpected;
        note(unexpected_notes_, "unexpected: " + e.queue + " delivered '" + e.body + "' as id " +
                                    std::to_string(e.id.value) + ", acknowledged as id " +
                                    std::to_string(s.id.value));
      } else if (!s.acknowledged) {
        if (!s.seen_id) {
          s.seen_id = e.id;
          ++r_.unknown_delivered;
        } else if (s.seen_id != e.id) {
          ++r_.unexpected;
          note(unexpected_notes_, "unexpected: " + e.queue + " delivered '" + e.body +
                                      "' under two ids, " + std::to_string(s.seen_id.value) +
                                      " and " + std::to_string(e.id.value));
        }
      }
      s.delivered = true;
    }

    auto& m = messages_[{e.queue, e.id.value}];
    if (m.confirmed_seq != 0) {
      ++r_.duplicates_after_ack;
      note(duplicate_notes_, "duplicate after a confirmed ack: " + e.queue + " '" + e.body +
                                 "' (id " + std::to_string(e.id.value) + ") delivered again (" +
                                 "attempt " + std::to_string(e.lease.attempt) + ", run " +
                                 std::to_string(e.incarnation) + ") after its ack was confirmed");
    }
    if (m.delivered) ++r_.redeliveries;
    if (auto next = starts_.find(e.incarnation + 1); next != starts_.end() &&
                                                     e.deadline_us > next->second &&
                                                     !acked_leases_.contains(lease_key(e.lease))) {
      ++r_.leases_across_restart;
      if (auto* q = traits(e.queue); q && q->durable) ++r_.durable_leases_across_restart;
    }
    m.delivered = true;
    m.latest = e.lease;

    auto* t = traits(e.queue);
    auto parsed = resolve(e.queue, e.body, e.id);
    if (!t || !t->ordered || !parsed) return;
    auto& k = keys_[{e.queue, parsed->key}];
    // Order: nothing acknowledged-enqueued before n may still be unreleased.
    if (auto first = k.unreleased.begin(); first != k.unreleased.end() && *first < parsed->n) {
      ++r_.order_violations;
      k.flagged_in_run[e.incarnation].insert(parsed->n);
      note(order_notes_, "order violation: " + e.queue + " key " + parsed->key +
                             ": n=" + std::to_string(parsed->n) + " delivered (run " +
                             std::to_string(e.incarnation) + ") while n=" + std::to_string(*first) +
                             " was not acked");
    }
    // Within one broker run a key's deliveries never go back: an acknowledged-enqueued m
    // delivered after some n > m of the same run was present while n was handed out.
    auto& latest = k.max_n_in_run[e.incarnation];
    if (parsed->n < latest && bodies_.contains({e.queue, e.id.value}) &&
        !k.flagged_in_run[e.incarnation].contains(latest)) {  // the same inversion, once
      ++r_.order_violations;
      note(order_notes_, "order violation: " + e.queue + " key " + parsed->key +
                             ": n=" + std::to_string(parsed->n) + " delivered (run " +
                             std::to_string(e.incarnation) + ") after n=" + std::to_string(latest) +
                             " in the same run");
    }
    latest = std::max(latest, parsed->n);
    if (bodies_.contains({e.queue, e.id.value})) k.unreleased.insert(parsed->n);
    // In flight: every earlier lease of the key must be over when this one begins.
    std::erase_if(k.held, [&](const held_lease& h) {
      auto slack = h.incarnation == e.incarnation ? 0 : opts_.clock_tolerance_us;
      return h.deadline_us <= e.grant_us + slack;
    });
    if (!k.held.empty()) {
      bool after_restart = std::all_of(k.held.begin(), k.held.end(), [&](const held_lease& h) {
        return h.incarnation < e.incarnation;
      });
      auto start = starts_.find(e.incarnation);
      bool after_grace = start != starts_.end() && e.grant_us + opts_.clock_tolerance_us >=
                                                       start->second + opts_.reclaim_grace_us;
      if (!t->durable && after_restart && after_grace) {
        ++r_.fast_overlaps_after_restart;
      } else {
        ++r_.in_flight_violations;
        const auto& h = k.held.front();
        note(in_flight_notes_,
             "in-flight violation: " + e.queue + " key " + parsed->key + ": n=" +
                 std::to_string(parsed->n) + " leased (run " + std::to_string(e.incarnation) +
                 ") while n=" + std::to_string(h.n) + " (run " + std::to_string(h.incarnation) +
                 ") held a lease for " + std::to_string(h.deadline_us - e.grant_us) + " us more");
      }
    }
    k.held.push_back(held_lease{e.lease, e.deadline_us, e.incarnation, parsed->n});
  }

  void on_ack_sent(const event& e) {
    auto found = outcomes_.find(e.request);
    auto result = found == outcomes_.end() ? outcome::unknown : found->second;
    if (result == outcome::failed) return;  // the lease runs on until its deadline
    auto* t = traits(e.queue);
    auto parsed = resolve(e.queue, e.body, e.lease.msg);
    if (!t || !t->ordered || !parsed) return;
    auto& k = keys_[{e.queue, parsed->key}];
    std::erase_if(k.held, [&](const held_lease& h) { return h.lease == e.lease; });
    auto m = messages_.find({e.queue, e.lease.msg.value});
    if (m != messages_.end() && m->second.latest == e.lease) k.unreleased.erase(parsed->n);
  }

  void on_ack_ok(const event& e) {
    auto& m = messages_[{e.queue, e.lease.msg.value}];
    if (m.confirmed_seq == 0) {
      m.confirmed_seq = e.seq;
      ++r_.confirmed_acks;
    }
    if (auto it = sent_.find({e.queue, e.body}); it != sent_.end()) it->second.confirmed = true;
  }

  const std::vector<event>& events_;
  const checker_options& opts_;
  check_report r_;
  std::map<std::pair<std::string, std::string>, sent> sent_;
  std::map<std::pair<std::string, std::uint64_t>, message_state> messages_;
  std::map<std::pair<std::string, std::string>, key_state> keys_;
  std::map<std::uint64_t, outcome> outcomes_;
  /// Acknowledged ids and the bodies they were acknowledged with.
  std::map<std::pair<std::string, std::uint64_t>, std::string> bodies_;
  std::map<std::uint32_t, std::int64_t> starts_;
  std::set<lease_tuple> acked_leases_;  ///< leases an ack was sent for
  std::size_t lost_notes_ = 0, unexpected_notes_ = 0, order_notes_ = 0, in_flight_notes_ = 0,
              duplicate_notes_ = 0;
};

}  // namespace

check_report check(const std::vector<event>& events, const checker_options& opts) {
  return replay{events, opts}.run();
}

std::string headline(std::uint64_t cycles, const check_report& r) {
  std::ostringstream out;
  out << cycles << " crash-restart cycles, " << r.acknowledged << " acknowledged messages, "
      << r.lost << " lost, " << r.unexpected << " unexpected, " << r.order_violations
      << " order violations, " << r.in_flight_violations << " in-flight violations, "
      << r.duplicates_after_ack << " duplicates after a confirmed ack.";
  return out.str();
}

std::string render(std::uint64_t cycles, const check_report& r) {
  std::ostringstream out;
  out << headline(cycles, r) << "\n"
      << "  broker starts: " << r.restarts << ", deliveries: " << r.deliveries
      << " (redeliveries: " << r.redeliveries
      << "), messages with a confirmed ack: " << r.confirmed_acks << "\n"
      << "  enqueues with unknown outcome: " << r.unknown_enqueues
      << " (later delivered: " << r.unknown_delivered << "), acks unanswered: " << r.acks_unknown
      << ", acks refused: " << r.acks_failed << "\n"
      << "  fast-mode overlaps after restart (allowed): " << r.fast_overlaps_after_restart
      << ", unacked leases that outlived their broker run: " << r.leases_across_restart
      << " (durable queue: " << r.durable_leases_across_restart << ")\n";
  for (const auto& f : r.findings) out << "  " << f << "\n";
  return out.str();
}

}  // namespace laneq::kill9
