// The kill -9 test's journal and checker (checker.hpp; RELIABILITY.md T3).
#include "checker.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
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

using lease_tuple = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::uint64_t>;
lease_tuple lease_key(const lease_token& l) {
  return {l.group.value, l.msg.value, l.attempt, l.nonce};
}

/// What we sent under one body.
struct sent {
  bool acknowledged = false;
  message_id id;           ///< the acknowledged id
  message_id seen_id;      ///< unknown outcome: the id it was first delivered with
  bool delivered = false;  ///< this body was delivered
};

/// One message id's delivery history.
struct message_state {
  bool delivered = false;
  lease_token latest;               ///< its latest delivery's lease
  std::uint32_t latest_run = 0;     ///< the broker run of that delivery
  bool settled = false;             ///< an ack of `latest` was sent and not refused
  std::uint32_t processed_run = 0;  ///< ... the run it was sent in (0: none since `latest`)
  std::uint64_t confirmed_seq = 0;  ///< journal position of the first confirmed ack (0: none)
  std::set<lease_tuple> confirmed;  ///< leases whose ack was confirmed
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
    count_cut_by_kills();
    for (const auto& [where, s] : sent_) judge_lost(where, s);
    judge_drain();
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

  /// Pass 1: what was sent, how each ack ended, the runs and their kills.
  void collect() {
    for (const auto& e : events_) {
      switch (e.kind) {
        case event_kind::restart:
          ++r_.restarts;
          starts_[e.incarnation] = e.start_us;
          break;
        case event_kind::kill:
          ++r_.kills;
          kill_seqs_[e.incarnation] = e.seq;
          break;
        case event_kind::drain_end: drain_end_ = e.start_us; break;
        case event_kind::ack_sent:
          first_acks_.try_emplace(lease_key(e.lease), e.seq);
          ack_sent_[e.request] = {e.seq, e.incarnation};
          break;
        case event_kind::enqueue_sent: sent_seqs_[{e.queue, e.body}] = e.seq; break;
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
          unanswered_.push_back(&e);
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

  outcome outcome_of(std::uint64_t request) const {
    auto found = outcomes_.find(request);
    return found == outcomes_.end() ? outcome::unknown : found->second;
  }

  /// Whether journal position `seq` of run `run` came before that run's kill.
  bool before_kill(std::uint64_t seq, std::uint32_t run) const {
    auto k = kill_seqs_.find(run);
    return k != kill_seqs_.end() && seq < k->second;
  }

  /// Whether an ack of delivery `e`'s lease was sent while its run lived: before the run's
  /// kill (any ack, when the journal has no kill for it). An ack sent after the kill never
  /// reached that run: the lease outlived it.
  bool acked_in_run(const event& e) const {
    auto first = first_acks_.find(lease_key(e.lease));
    if (first == first_acks_.end()) return false;
    return !kill_seqs_.contains(e.incarnation) || before_kill(first->second, e.incarnation);
  }

  /// Coverage: enqueues and acks sent before their run's kill that got no OK answer.
  void count_cut_by_kills() {
    for (const auto* e : unanswered_)
      if (auto s = sent_seqs_.find({e->queue, e->body});
          s != sent_seqs_.end() && before_kill(s->second, e->incarnation))
        ++r_.enqueues_cut_by_kill;
    for (const auto& [request, sent] : ack_sent_)
      if (outcome_of(request) == outcome::unknown && before_kill(sent.first, sent.second))
        ++r_.acks_cut_by_kill;
  }

  /// Lost: an enqueue acknowledged (or shown stored by a delivery) whose body was never
  /// delivered, or whose message was neither confirmed acked nor settled by an ack of its
  /// latest delivery by the end of the journal.
  void judge_lost(const std::pair<std::string, std::string>& where, const sent& s) {
    if (!s.acknowledged && !s.seen_id) return;  // unanswered and never seen: may not exist
    auto what = where.first + " '" + where.second + "' (id " +
                std::to_string((s.acknowledged ? s.id : s.seen_id).value) + ")" +
                (s.acknowledged ? "" : ", enqueue unanswered but delivered,");
    if (!s.delivered) {
      ++r_.lost;
      note(lost_notes_, "lost: " + what + " was never delivered");
      return;
    }
    auto m = messages_.find({where.first, (s.acknowledged ? s.id : s.seen_id).value});
    if (m == messages_.end() || m->second.confirmed_seq != 0 || m->second.settled) return;
    ++r_.lost;
    note(lost_notes_, "lost: " + what + " was delivered (attempt " +
                          std::to_string(m->second.latest.attempt) + ", run " +
                          std::to_string(m->second.latest_run) +
                          "), never acked, and not delivered again by the end of the drain");
  }

  /// The drain must end after every lease not known to be acked ran out and after the last
  /// run's reclaim grace, or a message still held would pass for lost.
  void judge_drain() {
    if (!drain_end_) {
      ++r_.drain_too_early;
      note(drain_notes_, "drain too early: the journal has no drain_end (the drain never ended)");
      return;
    }
    auto horizon = drain_horizon_us(events_, opts_);
    if (*drain_end_ >= horizon) return;
    ++r_.drain_too_early;
    note(drain_notes_, "drain too early: it ended " + std::to_string(horizon - *drain_end_) +
                           " us before the last unconfirmed lease ran out or the last reclaim "
                           "grace passed");
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
    } else if (m.processed_run != 0) {
      ++(m.processed_run < e.incarnation ? r_.duplicates_after_restart : r_.duplicates_in_run);
    }
    if (m.delivered) ++r_.redeliveries;
    if (auto next = starts_.find(e.incarnation + 1);
        next != starts_.end() && e.deadline_us > next->second && !acked_in_run(e)) {
      ++r_.leases_across_restart;
      if (auto* q = traits(e.queue); q && q->durable) ++r_.durable_leases_across_restart;
    }
    m.delivered = true;
    m.latest = e.lease;
    m.latest_run = e.incarnation;
    m.settled = false;
    m.processed_run = 0;

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
    if (outcome_of(e.request) == outcome::failed) return;  // the lease runs on until its deadline
    auto m = messages_.find({e.queue, e.lease.msg.value});
    bool latest = m != messages_.end() && m->second.latest == e.lease;
    if (latest) {
      m->second.settled = true;
      m->second.processed_run = e.incarnation;
    }
    auto* t = traits(e.queue);
    auto parsed = resolve(e.queue, e.body, e.lease.msg);
    if (!t || !t->ordered || !parsed) return;
    auto& k = keys_[{e.queue, parsed->key}];
    std::erase_if(k.held, [&](const held_lease& h) { return h.lease == e.lease; });
    if (latest) k.unreleased.erase(parsed->n);
  }

  void on_ack_ok(const event& e) {
    auto& m = messages_[{e.queue, e.lease.msg.value}];
    if (!m.confirmed.empty() && !m.confirmed.contains(lease_key(e.lease))) {
      ++r_.acked_twice;
      note(acked_twice_notes_, "acked twice: " + e.queue + " '" + e.body + "' (id " +
                                   std::to_string(e.lease.msg.value) + "): an ack of attempt " +
                                   std::to_string(e.lease.attempt) + " (run " +
                                   std::to_string(e.incarnation) +
                                   ") was confirmed after an ack of another lease of it");
    }
    m.confirmed.insert(lease_key(e.lease));
    if (m.confirmed_seq == 0) {
      m.confirmed_seq = e.seq;
      ++r_.confirmed_acks;
    }
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
  std::map<std::uint32_t, std::uint64_t> kill_seqs_;  ///< run -> journal position of its kill
  std::optional<std::int64_t> drain_end_;
  std::map<lease_tuple, std::uint64_t> first_acks_;  ///< lease -> journal position of its first ack
  /// ack request -> (journal position, run) of its ack_sent
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> ack_sent_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> sent_seqs_;  ///< enqueue_sent
  std::vector<const event*> unanswered_;  ///< the enqueue_unknown events
  std::size_t lost_notes_ = 0, unexpected_notes_ = 0, order_notes_ = 0, in_flight_notes_ = 0,
              duplicate_notes_ = 0, acked_twice_notes_ = 0, drain_notes_ = 0;
};

}  // namespace

check_report check(const std::vector<event>& events, const checker_options& opts) {
  return replay{events, opts}.run();
}

std::int64_t drain_horizon_us(const std::vector<event>& events, const checker_options& opts) {
  std::set<lease_tuple> confirmed;
  for (const auto& e : events)
    if (e.kind == event_kind::ack_ok) confirmed.insert(lease_key(e.lease));
  std::int64_t horizon = 0;
  for (const auto& e : events) {
    if (e.kind == event_kind::deliver && !confirmed.contains(lease_key(e.lease)))
      horizon = std::max(horizon, e.deadline_us);
    if (e.kind == event_kind::restart)
      horizon = std::max(horizon, e.start_us + opts.reclaim_grace_us);
  }
  return horizon;
}

namespace {

/// Lines that only a crash, a failed check or a sanitizer writes.
constexpr std::array<std::string_view, 12> failure_markers{
    "Sanitizer",         // ASan, LSan, UBSan, TSan: "ERROR: AddressSanitizer", "SUMMARY: ..."
    "runtime error:",    // UBSan's report line
    "Assertion",         // assert(): "Assertion `x' failed."
    "terminate called",  // std::terminate
    "Aborted",          "Segmentation fault", "stack smashing detected",    "double free",
    "free(): ",         "malloc(): ",         "pure virtual method called", "DEADLYSIGNAL",
};

std::string describe_status(int status) {
  if (status < 0) return "no exit status";
  if (status <= 128) return "exit code " + std::to_string(status);
  auto sig = status - 128;
  std::string name = sig == SIGABRT   ? " (SIGABRT)"
                     : sig == SIGSEGV ? " (SIGSEGV)"
                     : sig == SIGBUS  ? " (SIGBUS)"
                     : sig == SIGILL  ? " (SIGILL)"
                     : sig == SIGFPE  ? " (SIGFPE)"
                     : sig == SIGTERM ? " (SIGTERM)"
                                      : "";
  return "signal " + std::to_string(sig) + name;
}

}  // namespace

std::string judge_exit(int status, const std::string& stderr_text) {
  std::string why;
  if (status != 128 + SIGKILL)
    why = "it ended with " + describe_status(status) + ", not by our SIGKILL";
  std::string shown;
  std::size_t count = 0;
  std::istringstream in{stderr_text};
  for (std::string line; std::getline(in, line);) {
    bool marked = std::any_of(failure_markers.begin(), failure_markers.end(),
                              [&](std::string_view m) { return line.find(m) != line.npos; });
    if (marked && count++ < 20) shown += "    " + line + "\n";
  }
  if (count > 0)
    why += (why.empty() ? "" : "; ") + std::string{"its stderr shows a failure ("} +
           std::to_string(count) + " line(s)):\n" + shown;
  return why;
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
      << "  duplicates (allowed: an unconfirmed ack lost): " << r.duplicates_after_restart
      << " after a restart, " << r.duplicates_in_run
      << " within a run; acked twice: " << r.acked_twice
      << "; drain too early: " << r.drain_too_early << "\n"
      << "  laneqd starts: " << r.restarts << ", kills: " << r.kills
      << ", deliveries: " << r.deliveries << " (redeliveries: " << r.redeliveries
      << "), messages with a confirmed ack: " << r.confirmed_acks << "\n"
      << "  enqueues with unknown outcome: " << r.unknown_enqueues
      << " (later delivered: " << r.unknown_delivered << "), acks unanswered: " << r.acks_unknown
      << ", acks refused: " << r.acks_failed << "\n"
      << "  work cut by the kills: enqueues sent and unanswered " << r.enqueues_cut_by_kill
      << ", acks sent and unanswered " << r.acks_cut_by_kill
      << ", unacked leases that outlived their broker run " << r.leases_across_restart
      << " (durable queue: " << r.durable_leases_across_restart << ")\n"
      << "  fast-mode overlaps after restart (allowed): " << r.fast_overlaps_after_restart << "\n";
  for (const auto& f : r.findings) out << "  " << f << "\n";
  return out.str();
}

}  // namespace laneq::kill9
