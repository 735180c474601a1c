// The kill -9 test's client-side journal and its checker (RELIABILITY.md T3; promises G1-G4 of
// docs/guarantees.md). Pure: no CAF, no processes, no clock reads, so the checker is tested on
// synthetic journals (checker_test.cpp) as well as on real runs (kill9_test.cpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "laneq/ids.hpp"
#include "laneq/lease.hpp"

namespace laneq::kill9 {

/// What one journal entry records.
enum class event_kind : std::uint8_t {
  restart = 1,          ///< a laneqd process was started (incarnation, start_us)
  enqueue_ok = 2,       ///< an enqueue the broker acknowledged (id)
  enqueue_unknown = 3,  ///< an enqueue that failed or got no answer: may or may not exist
  deliver = 4,          ///< a delivery our consumer received (id, lease, grant_us, deadline_us)
  ack_sent = 5,         ///< an ack about to be sent (lease, request)
  ack_ok = 6,           ///< the broker confirmed that ack (request)
  ack_failed = 7,       ///< the broker refused that ack, e.g. lease_expired (request)
  ack_unknown = 8,      ///< that ack got no answer: it may or may not have been applied (request)
  enqueue_sent = 9,     ///< an enqueue about to be sent (queue, body), one event per message
  kill = 10,            ///< the driver is about to SIGKILL the run `incarnation`
  drain_end = 11,       ///< the drain found every queue empty (start_us: wall clock then)
};

/// One journal entry. Fields not named for a kind are left at their defaults.
struct event {
  std::uint64_t seq = 0;  ///< position in the journal (set by `journal::record`)
  event_kind kind = event_kind::restart;
  std::string queue{};
  std::string body{};  ///< the message body (enqueues, deliveries, acks)
  message_id id{};
  lease_token lease{};
  std::int64_t grant_us = 0;      ///< deliver: broker time the lease began (deadline - lease)
  std::int64_t deadline_us = 0;   ///< deliver: broker time the lease ends
  std::int64_t start_us = 0;      ///< restart, drain_end: wall clock (us) just before the process
                                  ///< started, or when the drain's last receive came back empty
  std::uint32_t incarnation = 0;  ///< broker run (1 for the first) the event happened in
  std::uint32_t consumer = 0;     ///< deliver, ack: which consumer
  std::uint64_t request = 0;      ///< ack_*: pairs an ack_sent with its outcome
};

/// The journal: every client-visible event in one total order (thread-safe). An event is
/// recorded before the request it describes is sent, and after the answer it describes arrived,
/// so a broker action caused by a request always comes after the request in the journal.
class journal {
 public:
  /// Appends `e` with the next sequence number; returns that number.
  std::uint64_t record(event e);
  /// A copy of every event so far, in order.
  std::vector<event> events() const;

 private:
  mutable std::mutex mu_;
  std::vector<event> events_;
};

/// How a queue under test behaves.
struct queue_traits {
  std::string name{};
  bool ordered = false;  ///< ordered by key: the order and in-flight checks apply
  bool durable = false;  ///< durable delivery: no in-flight exception after a restart
};

struct checker_options {
  std::vector<queue_traits> queues{};
  /// The brokers' reclaim grace (fast delivery: heads wait that long after a restart).
  std::int64_t reclaim_grace_us = 0;
  /// Slack when comparing times of different broker runs (each run maps its own clock onto the
  /// wall clock at start). Applies only across runs, and only in the broker's favour.
  std::int64_t clock_tolerance_us = 5'000;
};

/// What the checker found. The T3 counts must all be 0 (`clean`).
struct check_report {
  std::uint64_t restarts = 0;
  std::uint64_t kills = 0;
  std::uint64_t acknowledged = 0;       ///< acknowledged enqueues
  std::uint64_t unknown_enqueues = 0;   ///< enqueues with an unknown outcome
  std::uint64_t unknown_delivered = 0;  ///< ... of which a delivery showed they were stored
  std::uint64_t deliveries = 0;
  std::uint64_t redeliveries = 0;
  std::uint64_t confirmed_acks = 0;               ///< messages with a confirmed ack
  std::uint64_t acks_unknown = 0;                 ///< ack requests without an answer
  std::uint64_t acks_failed = 0;                  ///< ack requests the broker refused
  std::uint64_t fast_overlaps_after_restart = 0;  ///< allowed (ARCHITECTURE.md §4)
  /// Duplicates (allowed, counted): a message delivered again after an ack of it was sent and
  /// not refused, but never confirmed: the ack was lost in a kill (the broker restarted between
  /// the ack and the new delivery), or, within one run, its answer did not come in time.
  std::uint64_t duplicates_after_restart = 0;
  std::uint64_t duplicates_in_run = 0;
  /// Coverage (the kills hit work in progress): enqueues sent before the kill of their run that
  /// never got an OK answer, acks likewise, and leases with no ack sent before their run's kill
  /// whose deadline outlived the run (the in-flight check across a restart has something to
  /// check), in all queues and in durable ones.
  std::uint64_t enqueues_cut_by_kill = 0;
  std::uint64_t acks_cut_by_kill = 0;
  std::uint64_t leases_across_restart = 0;
  std::uint64_t durable_leases_across_restart = 0;

  std::uint64_t lost = 0;
  std::uint64_t unexpected = 0;
  std::uint64_t order_violations = 0;
  std::uint64_t in_flight_violations = 0;
  std::uint64_t duplicates_after_ack = 0;
  std::uint64_t acked_twice = 0;
  /// The harness's own soundness: the drain ended while a lease not known to be acked could
  /// still run, or within the last run's reclaim grace, or never ended (no drain_end event).
  /// Then "lost" cannot be told from "still held", so the run is not clean.
  std::uint64_t drain_too_early = 0;

  /// The first few findings of each kind, one line each.
  std::vector<std::string> findings;

  bool clean() const {
    return lost == 0 && unexpected == 0 && order_violations == 0 && in_flight_violations == 0 &&
           duplicates_after_ack == 0 && acked_twice == 0 && drain_too_early == 0;
  }
  /// Whether the kills interrupted work: an enqueue and a lease were cut by them, so a run that
  /// only killed an idle broker does not pass.
  bool kills_hit_work() const { return enqueues_cut_by_kill > 0 && leases_across_restart > 0; }
};

/// Replays `events` (in journal order) and counts, with these definitions:
/// - lost: an acknowledged enqueue not acked by the end of the drain: never delivered, or
///   delivered and then gone with its latest delivery unacked (no ack sent, or the ack was
///   refused). An enqueue without an answer that a delivery showed stored counts the same way.
///   "Acked" means an ack of the latest delivery was sent and not refused: confirmed, or
///   unanswered (lost in a kill) and the message never came back;
/// - unexpected: a delivery whose body we never enqueued, or whose id differs from the id the
///   enqueue was acknowledged with (or, for an unknown-outcome enqueue, from an earlier
///   delivery of the same body);
/// - order violation (ordered queues): a delivery of n of key k while an acknowledged-enqueued
///   m < n of k was not released; m is released from the moment an ack of its latest delivery
///   was sent, unless the broker refused that ack (an ack may be confirmed only after the group
///   has moved on; an unconfirmed ack lost in a crash may bring m back, which is allowed);
///   also, within one broker run, a delivery of an acknowledged-enqueued m after a delivery of
///   some n > m of the same key (the broker still had m when it handed out n);
/// - in-flight violation (ordered queues): a delivery of key k while an earlier delivery of k
///   still held its lease: no ack sent (or the ack was refused) and its deadline not yet at the
///   new lease's start. On a fast queue, an overlap of a lease from an earlier broker run with a
///   redelivery granted after the restart's reclaim grace is allowed and counted apart;
/// - duplicate after a confirmed ack: a delivery of a message after an ack of it was confirmed;
/// - acked twice: acks of two different leases of one message both confirmed (a stale lease
///   was accepted: the message was acked more than once);
/// - drain too early: see `check_report::drain_too_early`.
check_report check(const std::vector<event>& events, const checker_options& opts);

/// The wall-clock time (us) from which the drain may judge: every lease handed out whose ack was
/// not confirmed has run out, and the last run's reclaim grace has passed. The driver waits for
/// it (with slack) before its final receive.
std::int64_t drain_horizon_us(const std::vector<event>& events, const checker_options& opts);

/// How a killed laneqd ended: empty when it died of our SIGKILL (`status` as
/// `test::wait_exit` gives it: the exit code, or 128 + the signal) and its stderr shows no
/// sanitizer report, failed assertion, abort or crash; else why not, with the lines that show it.
std::string judge_exit(int status, const std::string& stderr_text);

/// "N crash-restart cycles, M acknowledged messages, 0 lost, ..." (RELIABILITY.md report
/// format).
std::string headline(std::uint64_t cycles, const check_report& r);

/// The whole report block: the headline, the other counts and the findings.
std::string render(std::uint64_t cycles, const check_report& r);

}  // namespace laneq::kill9
