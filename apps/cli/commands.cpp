// The commands and their options (issue 4 §4, issue 25 §2): a table, not logic. app.cpp makes
// the CLI11 app from it; every number option carries the server's bounds from laneq/limits.hpp.
#include <chrono>
#include <climits>
#include <cstdint>

#include "cli.hpp"
#include "laneq/limits.hpp"

namespace laneq::cli {

constexpr std::size_t any_count = SIZE_MAX;

namespace {

option_spec opt(std::string_view name, bool value, std::string_view help, bool repeat = false) {
  return option_spec{name, value, repeat, help};
}

/// A whole-number option from `min` to `max`.
option_spec num(std::string_view name, std::int64_t min, std::int64_t max, std::string_view help,
                bool repeat = false) {
  option_spec o{name, true, repeat, help};
  o.number = true;
  o.min = min;
  o.max = max;
  return o;
}

/// An option whose value is a file.
option_spec file(std::string_view name, std::string_view help, bool repeat = false) {
  option_spec o{name, true, repeat, help};
  o.path = true;
  return o;
}

/// `-q`, `--quiet`.
option_spec quiet(std::string_view help) {
  option_spec o{"quiet", false, false, help};
  o.short_name = 'q';
  return o;
}

/// A bound of limits.hpp in milliseconds, as the HTTP API counts.
constexpr std::int64_t ms(duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

constexpr std::int64_t lease_ms_min = ms(limits::lease_min);
constexpr std::int64_t lease_ms_max = ms(limits::lease_max);
constexpr std::int64_t wait_ms_max = ms(limits::receive_wait_max);
constexpr std::int64_t delay_ms_max = ms(limits::delay_max);
constexpr std::int64_t retry_after_ms_max = ms(limits::retry_after_max);
constexpr std::int64_t ordered_batch_max = limits::ordered_batch_max;
constexpr std::int64_t enqueue_batch_max = limits::enqueue_batch_max;
constexpr auto max_depth_messages_max = static_cast<std::int64_t>(limits::max_depth_messages_max);
constexpr auto max_depth_bytes_max = static_cast<std::int64_t>(limits::max_depth_bytes_max);
constexpr std::int64_t retention_ms_min = ms(limits::retention_min);
constexpr std::int64_t retention_ms_max = ms(limits::retention_max);

/// The retention options `queue create` and `queue update` share (docs/api.md "Retention").
option_spec retention_ms_option() {
  return num("retention-ms", retention_ms_min, retention_ms_max,
             "expire a message that has waited this long since its enqueue or redrive");
}
option_spec on_expiry_option() {
  return opt("on-expiry", true, "what an expired message becomes: dead_letter (default) | drop");
}
option_spec dead_letter_retention_ms_option() {
  return num("dead-letter-retention-ms", retention_ms_min, retention_ms_max,
             "delete a dead letter this long after it died");
}

/// Options `send` and `topic publish` share.
std::vector<option_spec> outgoing_options() {
  return {opt("header", true, "NAME=VALUE header on every message (repeatable)", true),
          opt("fairness-key", true, "fairness key of every message"),
          num("delay-ms", 0, delay_ms_max, "deliver no earlier than this many ms from now"),
          file("file", "a message body from a file (bytes that are not UTF-8 go as base64)", true),
          opt("stdin-lines", false, "one message per line of standard input"),
          opt("base64", false, "the BODY arguments are base64 (sent as body_base64)"),
          num("batch", 1, enqueue_batch_max, "messages per request (default 100)")};
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
      file("cacert",
           "https: trust the CA certificates in this PEM file (a self-signed laneqd's own "
           "certificate works too) instead of the system's (env LANEQ_CACERT)"),
      opt("insecure", false,
          "https: do not verify laneqd's certificate; for testing only (anyone on the path can "
          "read and change the traffic, the token too)"),
      file("client-cert", "https: client certificate (PEM) for a laneqd that asks for one"),
      file("client-key", "https: the client certificate's private key (PEM)"),
      opt("json", false, "print the server's JSON answer instead of text"),
      num("timeout-ms", 1, 3'600'000, "per-request timeout (default 30000)"),
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
        num("lease-ms", lease_ms_min, lease_ms_max, "default lease of a delivery"),
        num("max-attempts", 1, limits::max_attempts_max,
            "deliveries before a message is dead-lettered"),
        opt("throttle", true,
            "RATE[/BURST][@KEY,KEY...]: at most RATE deliveries/s per group of KEY (repeatable)",
            true),
        opt("durability", true, "delivery durability: fast | durable"),
        num("max-depth-messages", 1, max_depth_messages_max,
            "refuse enqueues past this many messages (429 queue_full)"),
        num("max-depth-bytes", 1, max_depth_bytes_max,
            "refuse enqueues past this many body bytes (429 queue_full)"),
        retention_ms_option(), on_expiry_option(), dead_letter_retention_ms_option(),
        opt("spec", true, "the whole spec as JSON (the other options override its fields)"),
        file("spec-file", "read the spec JSON from a file")},
       cmd_queue_create},
      {"queue update",
       "NAME",
       "change a queue's settings in place (PATCH): the ordering, shards and keys stay fixed",
       1,
       1,
       {num("lease-ms", lease_ms_min, lease_ms_max, "default lease of a delivery"),
        num("max-attempts", 1, limits::max_attempts_max,
            "deliveries before a message is dead-lettered"),
        opt("throttle", true,
            "RATE[/BURST][@KEY,KEY...]: replaces the throttles (same keys, in order; repeatable)",
            true),
        opt("durability", true, "delivery durability: fast | durable (from the next start)"),
        num("max-depth-messages", 1, max_depth_messages_max,
            "refuse enqueues past this many messages (429 queue_full)"),
        num("max-depth-bytes", 1, max_depth_bytes_max,
            "refuse enqueues past this many body bytes (429 queue_full)"),
        retention_ms_option(), on_expiry_option(), dead_letter_retention_ms_option(),
        opt("patch", true,
            "a JSON merge patch of the spec (the other options override its fields; null resets "
            "a field)"),
        file("patch-file", "read the JSON merge patch from a file")},
       cmd_queue_update},
      {"queue get", "NAME", "show a queue's spec and stats", 1, 1, {}, cmd_queue_get},
      {"queue list", "", "list the queues", 0, 0, {}, cmd_queue_list},
      {"queue delete",
       "NAME",
       "delete a queue; one holding messages or dead letters only with --force",
       1,
       1,
       {opt("force", false, "delete it with every message and dead letter in it")},
       cmd_queue_delete},
      {"queue purge",
       "NAME",
       "delete the waiting messages of a queue (or of one group); those in flight stay",
       1,
       1,
       {opt("group", true, "only this ordering group (its key as deliveries show it)")},
       cmd_queue_purge},
      {"peek",
       "QUEUE",
       "show the first messages without a lease (read only; per group oldest first)",
       1,
       1,
       {num("limit", 1, limits::peek_max, "up to this many messages (default 10)"),
        opt("group", true, "only this ordering group (its key as deliveries show it)")},
       cmd_peek},
      {"send", "QUEUE [BODY...]", "send messages (one per BODY, --file or stdin line); prints ids",
       1, any_count,
       [] {
         auto o = outgoing_options();
         o.push_back(quiet("print only the ids, one per line"));
         return o;
       }(),
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
      {"topic publish", "TOPIC [BODY...]",
       "publish messages into every queue of a topic, all or nothing per request; prints the ids "
       "per queue",
       1, any_count, outgoing_options(), cmd_topic_publish},
      {"receive",
       "QUEUE",
       "take messages under a lease",
       1,
       1,
       {num("max", 1, limits::receive_batch_max, "up to this many messages (default 1)"),
        num("lease-ms", lease_ms_min, lease_ms_max, "lease length (default: the queue's)"),
        num("wait-ms", 0, wait_ms_max, "long-poll this long for the first message (default 0)"),
        num("batch", 1, ordered_batch_max,
            "up to this many consecutive messages of one ordering group under one lease, an "
            "ordered batch (default 1; --max still bounds the whole answer)"),
        quiet("one line per message: LEASE<TAB>ORDERING_KEY<TAB>BODY (a batch's messages share a "
              "lease, in batch order)")},
       cmd_receive},
      {"ack",
       "QUEUE LEASE...",
       "acknowledge delivered messages (removes them; a batch's lease acks its whole batch)",
       2,
       any_count,
       {num("count", 1, ordered_batch_max,
            "with one batch lease: ack only its first C messages (batch_index below C, as "
            "delivered); the lease goes on over the rest")},
       cmd_ack},
      {"nack",
       "QUEUE LEASE",
       "give a message back: retry after a pause (its group waits) or dead-letter it",
       2,
       2,
       {num("retry-after-ms", 0, retry_after_ms_max, "retry no earlier than this (default 0)"),
        opt("dead-letter", false, "move the message to the dead-letter list now"),
        num("from", 0, ordered_batch_max - 1,
            "with a batch lease: the batch_index of the message that failed; those before it are "
            "acked, those after it go back behind it (default: the first not acked)")},
       cmd_nack},
      {"extend",
       "QUEUE LEASE",
       "extend a lease",
       2,
       2,
       {num("lease-ms", lease_ms_min, lease_ms_max, "the new lease length from now (required)")},
       cmd_extend},
      {"dlq list", "QUEUE", "list a queue's dead letters", 1, 1, {}, cmd_dlq_list},
      {"dlq redrive",
       "QUEUE [ID...]",
       "put dead letters back (all when no ID is given), or into another queue",
       1,
       any_count,
       {opt("to", true, "into this queue instead, as new messages there")},
       cmd_dlq_redrive},
      {"dlq delete",
       "QUEUE [ID...]",
       "delete dead letters: these IDs (all or none), or every one with --all",
       1,
       any_count,
       {opt("all", false, "every dead letter of the queue")},
       cmd_dlq_delete},
      {"groups",
       "QUEUE",
       "list a queue's ordering groups and what each waits for",
       1,
       1,
       {opt("blocked", false, "only groups that cannot deliver now (in flight, retry wait, ...)"),
        num("limit", 1, limits::groups_page_max, "groups per page (default 1000)"),
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
       {num("lease-ms", lease_ms_min, lease_ms_max, "lease of each message (default: the queue's)"),
        num("wait-ms", 0, wait_ms_max, "long-poll for the next message this long (default 5000)"),
        num("retry-after-ms", 0, retry_after_ms_max,
            "a failed message's retry waits this long (default 0)"),
        num("dead-letter-on", 1, 255, "an exit code that dead-letters (repeatable)", true),
        num("max-messages", 1, INT64_MAX, "stop after this many messages"),
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

}  // namespace laneq::cli
