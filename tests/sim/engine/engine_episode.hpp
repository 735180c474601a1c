// One episode of the engine simulation (docs/guarantees.md, "The engine simulation"): 1 to 3
// queues, each a shard engine with its own drawn spec and its clients' journal (answer_checker),
// in one engine_world. Each step is one client request (enqueue, receive of single messages or
// ordered batches of up to 5, ack, an ack of a batch's prefix, nack of a batch from one of its
// messages, extend, a consumer going silent, a stale token, a dead-letter listing, a redrive, a
// producer's resend),
// time moving on, or a crash; then the store commits, fails and answers some of what it holds and
// the clients read some of their replies. The whole shard's invariants are checked after every
// step. The episode ends with a drain (every answered enqueue ends acked or dead) and a restart
// that must find what the drain left.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "../answer_checker.hpp"
#include "engine_coverage.hpp"
#include "engine_world.hpp"

namespace laneq::sim {

/// How a queue's messages fall into ordering groups, as its clients work it out.
enum class grouping : std::uint8_t { none, whole_queue, account, tenant_and_account };

/// What a consumer holds: the deliveries of one lease (an ordered batch's, by batch_index, or one
/// message's) and how many of them, from the first, it has sent acks for (O12).
struct held_lease {
  std::vector<std::size_t> leases;  ///< the journal's lease indexes
  std::uint32_t done = 0;
  std::uint32_t left() const { return static_cast<std::uint32_t>(leases.size()) - done; }
};

/// One queue as its clients know it.
struct queue_client {
  std::string name;
  grouping groups = grouping::none;
  bool keyless_lane = false;  ///< a message without the account joins the keyless group
  std::uint64_t accounts = 1, tenants = 1;
  bool dedupe = false;  ///< messages carry an `id` header the queue dedupes on
  bool resend = false;  ///< the dedupe window is long: producers resend unconfirmed enqueues
  std::size_t resend_horizon = 0;  ///< resends go only to the last this many messages sent
  duration lease{0};               ///< the queue's default lease
  duration longest_lease{0};       ///< the longest lease a receive asked for
  std::uint64_t weight = 1;        ///< how often a step picks this queue
  std::unique_ptr<answer_checker> checker;
  std::vector<held_lease> held;    ///< leases whose consumers work on them
  std::vector<held_lease> stale;   ///< leases their consumers let go of
  std::vector<message_id> listed;  ///< the last dead-letter listing, less what was redriven
  int polls_open = 0;
  bool listing_open = false;
  bool listed_ok = false;  ///< the last listing was answered with the list (its read may fail)
  /// Recent unordered messages with what their producer sent, for a resend, and how many
  /// messages had been sent before each (every message adds a dedupe entry; the entry bound
  /// evicts the oldest first).
  struct sent_message {
    std::uint64_t body = 0;
    outgoing_message m;
    std::uint64_t sent_before = 0;
  };
  std::deque<sent_message> recent;
  std::uint64_t sent = 0;  ///< messages sent
};

class engine_episode {
 public:
  engine_episode(std::uint64_t seed, std::uint64_t episode, std::uint64_t steps,
                 engine_cov::coverage& cov);
  ~engine_episode();
  void run();

 private:
  enum class req_kind : std::uint8_t {
    enqueue,
    receive,
    ack,
    nack,
    extend,
    list,
    redrive,
    ack_count
  };
  struct pending {
    std::size_t q = 0;
    req_kind kind = req_kind::enqueue;
    /// The checker's op (an enqueue, receive or redrive); the ops of an ack, nack or extend are
    /// in `acks`, one per message it covers, with the token each was sent with.
    std::uint64_t op = 0;
    std::vector<std::pair<lease_token, std::uint64_t>> acks;
    bool poll = false;
    bool mid_batch = false;  ///< a nack from a batch's message after its first not acked
    /// An ack of a batch's prefix: the fewest messages it acks (those past what was sent before).
    std::uint64_t acked_min = 0;
  };

  // drawing the episode (engine_episode.cpp)
  std::uint64_t pick(std::uint64_t n);
  duration pick_us(std::int64_t lo, std::int64_t hi);
  shard_config draw_queue(std::size_t i, queue_client& c);
  void draw_ordering(queue_spec& spec, queue_client& c);
  void draw_limits(queue_spec& spec, shard_config& cfg, queue_client& c);
  std::string context() const;
  [[noreturn]] void fail(check kind, const std::string& what);

  // steps (engine_steps.cpp)
  void step();
  void act(std::size_t q);
  std::size_t pick_queue();
  void move_time();
  void do_crash();
  void do_enqueue(std::size_t q);
  outgoing_message draw_message(queue_client& c, std::string& group, duration& delay);
  void do_resend(std::size_t q);
  void do_receive(std::size_t q, std::uint32_t max = 0, bool no_poll = false);
  void do_ack(std::size_t q, std::size_t n);
  void do_ack_count(std::size_t q);
  void do_nack(std::size_t q, end_kind k);
  void do_extend(std::size_t q);
  void do_silence(std::size_t q);
  void do_stale(std::size_t q);
  /// Takes one of the held leases out of `c.held`.
  held_lease take_held(queue_client& c);
  /// The index in `h` of the first message whose ack the journal has not seen answered OK among
  /// those the consumer sent an ack of a prefix for (`done` if it saw them all answered OK).
  /// A lease presented again after it ended is presented whole, as before.
  std::size_t first_unconfirmed(const queue_client& c, const held_lease& h) const;
  void do_list(std::size_t q, std::uint32_t max = 0);
  void do_redrive(std::size_t q);
  /// Sends an ack (of what is left), a nack (from `from`, one of the messages left; none: the
  /// first) or an extend of `h`'s lease, with the journal's ops for each message it covers.
  void send_end(std::size_t q, const held_lease& h, end_kind k,
                std::optional<std::uint32_t> from = std::nullopt);
  request_id send(pending p);
  void pump();

  // replies (engine_replies.cpp)
  void read_replies(std::size_t n);
  void read_all();
  void read_reply(std::size_t q, std::size_t i);
  void on_reply(const pending& p, const pending_reply& pr);
  void on_received(const pending& p, const pending_reply& pr);
  void on_acked(const pending& p, const pending_reply& pr);
  /// An answer that covers every op of `p` alike (a nack, an extend, an ack of a prefix).
  void on_ended(const pending& p, const status& st, timestamp extended_to);
  void on_listed(const pending& p, const pending_reply& pr);

  // the end (engine_drain.cpp)
  void drain();
  bool drain_round();
  void judge_end();
  void judge_accounting(std::size_t q, std::size_t dead);
  std::string groups_of(std::size_t q);
  void restart_finds_the_same();
  void count_coverage();

  std::uint64_t seed_, episode_, steps_;
  engine_cov::episode_class class_;
  engine_cov::coverage& cov_;
  std::mt19937_64 rng_;
  std::vector<queue_client> clients_;
  std::unique_ptr<engine_world> world_;
  std::unordered_map<request_id, pending> pending_;
  request_id next_request_ = 1;
  std::uint64_t step_ = 0;
  std::uint64_t crash_per_mille_ = 1;
  std::uint64_t write_fail_per_mille_ = 0;
  duration reopen_{0};  ///< how long the store stays degraded after a failure
  std::uint64_t read_fail_per_mille_ = 0;
  bool draining_ = false;
  std::uint64_t received_ = 0;      ///< deliveries the drain's last receives got
  std::uint64_t partial_acks_ = 0;  ///< acks of a batch's prefix answered OK
  std::uint64_t mid_nacks_ = 0;     ///< nacks from a batch's later message answered OK
};

}  // namespace laneq::sim
