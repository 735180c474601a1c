// The client-side journal of a simulation whose requests overlap, and its checker: it sees only
// what clients see (each request as it is sent, each answer as it is read, in the order read)
// and judges the answers like the journals of tests/crash/kill9 and broker_power_loss. Shared by
// the overlapping simulation (overlap_test.cpp: the broker on CAF's test coordinator) and the
// engine simulation (engine/: the pure shard engine); no CAF here. The checks are listed in
// docs/guarantees.md, "The overlapping simulation" and "The engine simulation":
//   lost (G1/G2), duplicate (R8), order (G3), in-flight (G4), stale-lease and live-lease (O5),
//   not-before (O6, enqueue delays), reclaim (R6) and api.
// Ordered batches (docs/design/ordering.md O12): each delivery of a batch is a lease here, all of
// them with the batch's token; a client's op on the batch is one op per message it covers (an
// ack of those it acks, the nack of the one that failed, a `release` of those it returns behind
// it). The messages of one batch are in flight together, in their group's order; the shape of a
// batch (one group, consecutive batch_index from 0, its token's size) is an api check.
// A failure throws sim::checker_failure with "INVARIANT VIOLATED (<check>): ..." and the
// driver's context (seed, step, rerun command).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "checks.hpp"
#include "laneq/engine_io.hpp"
#include "laneq/error.hpp"
#include "laneq/lease.hpp"
#include "laneq/limits.hpp"
#include "laneq/time.hpp"

namespace laneq::sim {

/// How a consumer ends (or extends) a lease. `release`: a batch's message behind the one a nack
/// names goes back to its group, not attempted (O12).
enum class end_kind : std::uint8_t { ack, retry, dead, extend, release };

/// What the checker must know of the queue: its delivery mode and the rules that decide which
/// answers are possible.
struct checker_config {
  bool durable = false;
  /// Deliveries of a message before the last failed one dead-letters it (a dead letter the
  /// clients do not see until they list the dead letters).
  std::uint32_t max_attempts = limits::max_attempts_max;
  /// Fast delivery: how long a restarted run holds its recovered group heads for their old lease
  /// holders (recovery.md R6); 0: no hold, a restart ends every lease.
  duration reclaim_grace{0};
  /// Where the run was, appended to a failure (seed, episode, step, rerun command).
  std::function<std::string()> context;
  /// Prints every delivery read and every answer to an ack, nack or extend (LANEQ_SIM_TRACE=1).
  bool trace = false;
  /// Times are printed as microseconds since this point.
  timestamp origin;
  /// The queue's default lease: what an old run's batch taken back in fast delivery runs for
  /// from then on (R6; 0 where no batches are drawn).
  duration lease{0};
  /// Names the queue in a trace line.
  std::string label;
};

/// What the checker saw, for the drivers' coverage.
struct checker_counts {
  std::uint64_t deliveries = 0;
  std::uint64_t delivered_before_answer = 0;  ///< read before their enqueue's answer
  std::uint64_t acks = 0;                     ///< acks answered OK
  std::uint64_t acks_racing_expiry = 0;  ///< sent before the lease's deadline, answered after it
  std::uint64_t stale_refused = 0;       ///< acks, nacks and extends refused (lease gone)
  std::uint64_t reclaims = 0;            ///< fast: an old run's lease took its held head back
  std::uint64_t old_durable_leases = 0;  ///< durable: an old run's lease used after a restart
  std::uint64_t ends_cut = 0;            ///< acks, nacks and extends whose answer a crash lost
  std::uint64_t enqueues_cut = 0;        ///< enqueues whose answer a crash lost
  std::uint64_t suspicions = 0;          ///< order judged later: the earlier message may have died
  std::uint64_t batches = 0;             ///< ordered batches of two or more messages read
};

/// One delivery as a client read it, and what was done with its lease.
struct lease_rec {
  delivery d;
  std::uint64_t body = 0;
  std::size_t client = 0;       ///< the driver's: which consumer holds it
  std::uint64_t run = 0;        ///< the broker run that issued it
  timestamp granted, deadline;  ///< the deadline as last confirmed by an extend
  int ends_live = 0;            ///< acks and nacks sent and not refused
  int terminal_live = 0;        ///< ... of them acks and dead-letter nacks
  int extends_open = 0;         ///< extends sent and not answered (lost: open for good)
  int reclaims_open = 0;   ///< ops sent within the reclaim grace, not answered: may take it back
  bool confirmed = false;  ///< an ack or nack of it was answered OK
  bool acked = false, dead = false;     ///< an ack / a dead-letter nack answered OK
  bool terminal_unknown = false;        ///< an ack or dead-letter nack whose outcome is unknown
  std::optional<timestamp> not_before;  ///< a retry nack answered OK: no redelivery before
  /// An ordered batch an op of another of its messages took back after a restart (fast, R6):
  /// its deadline is then that op's time plus the queue's lease, at most this (and at least
  /// `deadline`, the run's start plus the lease).
  std::optional<timestamp> deadline_max;
  /// The run in which an op of an old run's lease of it, one of a batch ack whose write failed,
  /// may have taken its held head back (R6).
  std::uint64_t reclaim_maybe = 0;
};

class answer_checker {
 public:
  explicit answer_checker(checker_config cfg);

  // -- producers ------------------------------------------------------------------------------

  /// A new message of ordering group `group` ("": unordered) with an enqueue delay; returns the
  /// number its body carries (`body_text`).
  std::uint64_t new_message(std::string group, duration delay = duration{0});
  static std::string body_text(std::uint64_t body) { return "b" + std::to_string(body); }
  /// An enqueue of `bodies` goes out (again, for a resend of an unordered message whose first
  /// enqueue's outcome is unknown). Its messages take their place in their groups now.
  std::uint64_t enqueue_sent(const std::vector<std::uint64_t>& bodies, timestamp now);
  void enqueue_answered(std::uint64_t op, const result<std::vector<message_id>>& ids);
  /// Whether the client knows message `body` is stored (answered OK or delivered).
  bool known(std::uint64_t body) const;
  /// Whether an enqueue of `body` is under way (sent, not answered, not cut by a crash).
  bool enqueue_open(std::uint64_t body) const;

  // -- consumers ------------------------------------------------------------------------------

  /// A receive goes out, its leases `lease` long, asking for ordered batches of up to `batch`
  /// messages; returns its op.
  std::uint64_t receive_sent(std::uint32_t max, duration lease, timestamp now,
                             std::uint32_t batch = 1);
  /// Returns the leases of the deliveries read (indexes for `lease` and `end_sent`).
  std::vector<std::size_t> receive_answered(std::uint64_t op,
                                            const result<std::vector<delivery>>& out, timestamp now,
                                            std::size_t client = 0);
  /// An ack, nack or extend of lease `l` goes out; returns its op, or 0 when none is sent (an
  /// extend while another is under way).
  std::uint64_t end_sent(std::size_t l, end_kind k, timestamp now, duration retry_after = {},
                         duration by = {});
  /// `extended_to`: an extend's answer; `alone`: not one lease of a batch ack (whose one answer
  /// covers every lease of the batch).
  void end_answered(std::uint64_t op, const status& st, timestamp extended_to, timestamp now,
                    bool alone = true);

  // -- dead letters ---------------------------------------------------------------------------

  /// A listing answered at once (no request overlaps it).
  void dead_listed(const std::vector<dead_letter>& dls, timestamp now);
  std::uint64_t redrive_sent(const std::vector<message_id>& ids, timestamp now);
  void redrive_answered(std::uint64_t op, const result<std::uint64_t>& n, timestamp now);

  // -- crashes and the end --------------------------------------------------------------------

  /// The broker crashed at `now` and a new run starts: every answer not read yet is lost.
  void crash(timestamp now);
  /// The new run's recovery finished at `now` (its reclaim grace starts); without this call the
  /// run is taken to have started serving at the crash.
  void recovered(timestamp now);
  /// After the drain: every message the clients know was stored ended acked or dead (`dead`:
  /// the dead letters listed at the end).
  void judge_drain(const std::set<message_id>& dead);

  // -- queries --------------------------------------------------------------------------------

  std::uint64_t run() const { return run_; }
  const lease_rec& lease(std::size_t l) const { return leases_[l]; }
  std::size_t lease_count() const { return leases_.size(); }
  const checker_counts& counts() const { return counts_; }
  std::size_t enqueues_open() const { return enqueues_open_; }
  std::size_t ends_open() const { return ends_.size(); }
  /// The message with this id, if the clients learnt it (0: none).
  std::uint64_t body_of(message_id id) const;
  /// A check that failed earlier (in a handler that may have swallowed the exception).
  const std::optional<std::string>& failure() const { return failure_; }
  [[noreturn]] void fail(check kind, const std::string& what);

 private:
  struct suspicion {
    std::uint64_t later = 0;    ///< the message delivered while this one may have been ahead
    std::uint64_t arrival = 0;  ///< this message's arrival then
    timestamp granted;          ///< when the later one was granted
    std::string what;
  };
  /// Where a message's current arrival began (its place in its group, and since when).
  struct arrival_state {
    std::uint64_t arrival = 0;
    timestamp at;
    std::size_t lease = 0;
    std::uint64_t hidden_base = 0;
    std::optional<suspicion> suspected;
  };
  struct msg_rec {
    std::string group;          ///< "" = unordered
    std::uint64_t arrival = 0;  ///< its place in its group: enqueue or redrive order
    timestamp arrival_at;       ///< when its current arrival (first enqueue, last redrive) was sent
    duration delay{0};
    std::optional<timestamp> first_sent;
    std::optional<message_id> id;
    bool sent = false;                ///< an enqueue of it went out
    bool answered = false;            ///< an enqueue of it was answered OK
    bool stored_possible = false;     ///< answered OK, or an enqueue's answer was lost
    bool acked = false;               ///< an ack of it was answered OK: gone for good
    int open = 0;                     ///< its enqueues without an answer
    int ends_open = 0;                ///< acks, nacks and extends of it without an answer
    std::vector<std::size_t> leases;  ///< its deliveries, as read, by time granted
    std::size_t arrival_lease = 0;    ///< index of the first of them in the current arrival
    std::uint64_t hidden_base = 0;    ///< hidden receives when the current arrival began
    std::uint64_t redrives = 0;       ///< redrives sent of it
    int redrives_open = 0;
    /// A dead letter in memory since this time, while `redrives` is still this count and no
    /// crash came (a crash may undo a move it found uncommitted).
    std::optional<std::pair<std::uint64_t, timestamp>> dead_mark;
    bool place_unknown = false;  ///< a redrive of it whose outcome is unknown
    /// Where it was before the redrives of it now open, and where each open one put it (by its
    /// number); the latest that succeeded among them, with where it put it. A failed redrive
    /// puts it back where the latest other one that may still hold put it: overlapping redrives
    /// can all fail, in any order.
    arrival_state before_redrives;
    std::map<std::uint64_t, arrival_state> redrive_places;
    std::optional<std::pair<std::uint64_t, arrival_state>> redrive_won;
    std::optional<suspicion> suspected;
    bool known() const { return answered || !leases.empty(); }
  };
  struct group_rec {
    std::map<std::uint64_t, std::uint64_t> by_arrival;  ///< arrival -> body, in group order
    std::map<std::uint64_t, std::uint64_t> delivered;   ///< arrivals delivered at least once
    std::vector<std::size_t> leases;                    ///< leases that may still be live
    std::uint64_t reclaim_run = 0;  ///< a run in which an old lease of it was presented
    int doomed_open = 0;            ///< ops under way on its leases that must fail
  };
  struct end_op {
    std::size_t lease = 0;
    end_kind kind = end_kind::ack;
    timestamp sent;
    timestamp deadline;     ///< the lease's deadline when it was sent
    duration retry_after;   ///< a retry nack's
    duration by;            ///< an extend's
    std::string must_fail;  ///< empty: it may succeed
    bool may_fail = false;  ///< something else was under way for the lease, or a restart since
    bool reclaim = false;   ///< an old run's lease presented within the grace (R6)
  };
  struct receive_op {
    std::uint32_t max = 1;
    duration lease{0};
    std::uint32_t batch = 1;
  };
  enum class blocking : std::uint8_t { no, maybe, yes };

  // answers to ends (answer_checker.cpp)
  std::string must_fail(std::size_t l, timestamp t) const;
  bool reclaimable(const lease_rec& lr, timestamp t) const;
  std::string reclaim_refused(const msg_rec& m, std::size_t l) const;
  std::vector<std::size_t>::const_iterator later_lease(const msg_rec& m, std::size_t l) const;
  /// The leases of `l`'s ordered batch (`l` alone when it is a single message's).
  std::vector<std::size_t> batch_of(std::size_t l) const;
  /// An old run's lease of the batch was used: every lease of it lives in this run now.
  void taken_back(std::size_t l, timestamp now);
  std::string describe(const end_op& e) const;
  void ended_ok(const end_op& e, timestamp extended_to, timestamp now);
  void end_unknown(const end_op& e);
  void refused(const end_op& e, const error& err, timestamp now);
  // deliveries
  void delivered(const delivery& d, duration lease, timestamp now, std::size_t client);
  msg_rec& message_of(const delivery& d);
  void check_duplicate(const msg_rec& m, std::uint64_t body, timestamp granted);
  bool live(std::size_t l, timestamp t) const;
  void check_in_flight(msg_rec& m, timestamp granted, const delivery& d, timestamp now);
  /// The deliveries [from, to) of an answer share one token: a batch of its size, in order.
  void check_batch_shape(const std::vector<delivery>& ds, std::size_t from, std::size_t to,
                         std::uint32_t asked);
  /// Index in `m.leases` of the first lease of its current arrival (leases granted before the
  /// redrive that began it are before it, whenever they were read).
  std::size_t first_of_arrival(const msg_rec& m) const;
  /// The most attempts `m` may have had in its current arrival, deliveries the clients did not
  /// read included.
  std::uint64_t attempts_bound(const msg_rec& m) const;
  bool surely_dead(const msg_rec& m) const;
  /// What the clients know of `y`, for a failure.
  std::string state_of(const msg_rec& y) const;
  /// Whether `y`, ahead in its group, keeps a later message from going out.
  blocking blocks(const msg_rec& y) const;
  void check_order(msg_rec& m, std::uint64_t body, const delivery& d, timestamp granted,
                   bool first_in_arrival);
  void check_later_went_first(const msg_rec& m, std::uint64_t body, timestamp granted);
  void check_suspicions(msg_rec& m, std::uint64_t body, timestamp granted);
  void check_not_before(std::size_t l, timestamp granted);
  void check_reclaim(const msg_rec& m, std::uint64_t body, timestamp granted);
  void place(std::uint64_t body, std::uint64_t arrival);
  arrival_state current_arrival(const msg_rec& m) const;
  /// Puts `body` back in the arrival `was` (a redrive of it failed).
  void restore_arrival(std::uint64_t body, const arrival_state& was);
  /// Redrive `nth` of `body` failed: unless a later one decides, `body` goes back where the latest
  /// other redrive that may hold put it, or where it was before them.
  void undo_redrive(std::uint64_t body, std::uint64_t nth);
  void learn_id(std::uint64_t body, message_id id);
  std::string at(timestamp t) const;
  void note(timestamp now, const std::string& what) const;
  void trace(const char* what, const lease_token& l, timestamp t, timestamp now,
             const std::string& more = {}) const;

  checker_config cfg_;
  checker_counts counts_;
  std::uint64_t run_ = 1;
  timestamp run_start_;  ///< when the current run started serving (its reclaim grace began)
  bool serving_ = true;  ///< false while the current run recovers (requests wait for it)
  std::uint64_t run_start_arrival_ = 0;  ///< arrivals before it were stored before the run
  std::uint64_t next_body_ = 1, next_op_ = 1, next_arrival_ = 1;
  std::uint64_t hidden_receives_ = 0;  ///< receives whose deliveries the clients never read
  duration longest_lease_{0};
  std::map<std::uint64_t, msg_rec> msgs_;
  std::unordered_map<std::uint64_t, std::uint64_t> body_by_id_;
  std::map<std::string, group_rec> groups_;
  std::vector<lease_rec> leases_;
  std::map<std::string, std::vector<std::size_t>> batches_;       ///< by token text, batches of 2+
  std::map<std::uint64_t, end_op> ends_;                          ///< sent, not answered
  std::map<std::uint64_t, std::vector<std::uint64_t>> enqueues_;  ///< op -> bodies
  std::map<std::uint64_t, receive_op> receives_;
  /// op -> its bodies, each with its number among the redrives sent of it (`msg_rec::redrives`).
  std::map<std::uint64_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> redrives_;
  std::size_t enqueues_open_ = 0;
  std::optional<std::string> failure_;
};

}  // namespace laneq::sim
