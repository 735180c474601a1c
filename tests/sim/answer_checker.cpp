// The client-side journal and its checker (answer_checker.hpp): requests as sent, answers as
// read, and the checks each answer must pass.
#include "answer_checker.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace laneq::sim {

answer_checker::answer_checker(checker_config cfg) : cfg_(std::move(cfg)) {
  run_start_ = cfg_.origin;
}

namespace {

const char* what(end_kind k) {
  switch (k) {
    case end_kind::ack: return "ack";
    case end_kind::retry: return "nack";
    case end_kind::dead: return "dead-letter nack";
    case end_kind::extend: return "extend";
    case end_kind::release: return "return behind a nack";
  }
  return "?";
}

std::string b(std::uint64_t body) {
  return answer_checker::body_text(body);
}

}  // namespace

void answer_checker::fail(check kind, const std::string& text) {
  std::ostringstream os;
  os << "INVARIANT VIOLATED (" << name_of(kind) << "): " << text << "\n  run " << run_ << ", "
     << (cfg_.durable ? "durable" : "fast") << ", max_attempts " << cfg_.max_attempts;
  if (!cfg_.durable) os << ", reclaim grace " << cfg_.reclaim_grace.count() << "us";
  if (cfg_.context) os << ", " << cfg_.context();
  if (!failure_) failure_ = os.str();
  throw checker_failure(*failure_);
}

std::string answer_checker::at(timestamp t) const {
  return std::to_string((t - cfg_.origin).count()) + "us";
}

void answer_checker::trace(const char* event, const lease_token& l, timestamp t, timestamp now,
                           const std::string& more) const {
  if (cfg_.trace)
    std::cout << "  [" << at(now) << " run " << run_ << " " << cfg_.label << "] " << event << " "
              << to_string(l) << " @" << at(t) << " " << more << "\n";
}

void answer_checker::note(timestamp now, const std::string& what) const {
  if (cfg_.trace)
    std::cout << "  [" << at(now) << " run " << run_ << " " << cfg_.label << "] " << what << "\n";
}

// -- producers ------------------------------------------------------------------------------------

std::uint64_t answer_checker::new_message(std::string group, duration delay) {
  auto body = next_body_++;
  auto& m = msgs_[body];
  m.group = std::move(group);
  m.delay = delay;
  return body;
}

answer_checker::arrival_state answer_checker::current_arrival(const msg_rec& m) const {
  return arrival_state{m.arrival, m.arrival_at, m.arrival_lease, m.hidden_base, m.suspected};
}

void answer_checker::restore_arrival(std::uint64_t body, const arrival_state& was) {
  auto& m = msgs_.at(body);
  place(body, was.arrival);
  m.arrival_at = was.at;
  m.arrival_lease = was.lease;
  m.hidden_base = was.hidden_base;
  m.suspected = was.suspected;
}

void answer_checker::undo_redrive(std::uint64_t body, std::uint64_t nth) {
  auto& m = msgs_.at(body);
  m.redrive_places.erase(nth);
  if (m.redrive_won && m.redrive_won->first > nth) return;  // a later one moved it
  if (!m.redrive_places.empty() && m.redrive_places.rbegin()->first > nth)
    return;  // a later redrive of it decides its place
  // Back where the latest other redrive that may hold put it (an earlier one still open, or one
  // that succeeded), or where it was before them.
  const arrival_state* was = &m.before_redrives;
  std::uint64_t latest = 0;
  if (!m.redrive_places.empty()) {
    const auto& [k, place] = *m.redrive_places.rbegin();
    latest = k;
    was = &place;
  }
  if (m.redrive_won && m.redrive_won->first > latest) was = &m.redrive_won->second;
  restore_arrival(body, *was);
}

void answer_checker::place(std::uint64_t body, std::uint64_t arrival) {
  auto& m = msgs_.at(body);
  if (!m.group.empty()) {
    auto& g = groups_[m.group];
    if (m.arrival != 0) g.by_arrival.erase(m.arrival);
    g.by_arrival.emplace(arrival, body);
  }
  m.arrival = arrival;
}

std::uint64_t answer_checker::enqueue_sent(const std::vector<std::uint64_t>& bodies,
                                           timestamp now) {
  auto op = next_op_++;
  for (auto body : bodies) {
    auto& m = msgs_.at(body);
    if (!m.first_sent) {
      m.first_sent = now;
      m.arrival_at = now;
      m.hidden_base = hidden_receives_;
    }
    m.sent = true;
    ++m.open;
    if (m.arrival == 0) place(body, next_arrival_++);  // a resend keeps its place
  }
  enqueues_.emplace(op, bodies);
  ++enqueues_open_;
  if (cfg_.trace) {
    std::string text = "enqueue";
    for (auto body : bodies)
      text += " " + b(body) + (msgs_.at(body).group.empty() ? "" : "/" + msgs_.at(body).group);
    note(now, text);
  }
  return op;
}

void answer_checker::learn_id(std::uint64_t body, message_id id) {
  auto& m = msgs_.at(body);
  if (m.id && *m.id != id)
    fail(check::api, "message " + b(body) + " is known as id " + std::to_string(m.id->value) +
                         " and now named id " + std::to_string(id.value));
  auto [it, fresh] = body_by_id_.emplace(id.value, body);
  if (!fresh && it->second != body)
    fail(check::api,
         "id " + std::to_string(id.value) + " names " + b(it->second) + " and " + b(body));
  m.id = id;
}

void answer_checker::enqueue_answered(std::uint64_t op,
                                      const result<std::vector<message_id>>& ids) {
  auto node = enqueues_.extract(op);
  if (node.empty()) return;  // cut by a crash
  const auto& bodies = node.mapped();
  --enqueues_open_;
  for (auto body : bodies) --msgs_.at(body).open;
  if (!ids) {
    // A failed write that admits is dropped (write_log.hpp): nothing of it was stored.
    if (ids.err().code != errc::storage_failed)
      fail(check::api, "enqueue failed: " + to_string(ids.err()));
    if (cfg_.trace) {
      std::string text = "enqueue failed:";
      for (auto body : bodies) text += " " + b(body);
      note(cfg_.origin, text + ": " + to_string(ids.err()));
    }
    return;
  }
  if (ids.value().size() != bodies.size())
    fail(check::api, "an enqueue answered the wrong number of ids");
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    learn_id(bodies[i], ids.value()[i]);
    auto& m = msgs_.at(bodies[i]);
    m.answered = true;
    m.stored_possible = true;
  }
}

bool answer_checker::known(std::uint64_t body) const {
  return msgs_.at(body).known();
}

bool answer_checker::enqueue_open(std::uint64_t body) const {
  return msgs_.at(body).open > 0;
}

std::uint64_t answer_checker::body_of(message_id id) const {
  auto it = body_by_id_.find(id.value);
  return it == body_by_id_.end() ? 0 : it->second;
}

// -- receives -------------------------------------------------------------------------------------

std::uint64_t answer_checker::receive_sent(std::uint32_t max, duration lease, timestamp now,
                                           std::uint32_t batch) {
  (void)now;
  auto op = next_op_++;
  receives_.emplace(op, receive_op{max, lease, batch});
  longest_lease_ = std::max(longest_lease_, lease);
  return op;
}

std::vector<std::size_t> answer_checker::receive_answered(std::uint64_t op,
                                                          const result<std::vector<delivery>>& out,
                                                          timestamp now, std::size_t client) {
  auto node = receives_.extract(op);
  if (node.empty()) return {};
  const auto& r = node.mapped();
  if (!out) {
    // Durable delivery whose lease write failed: the leases were granted and run out unseen.
    if (out.err().code != errc::storage_failed)
      fail(check::api, "receive failed: " + to_string(out.err()));
    ++hidden_receives_;
    return {};
  }
  const auto& ds = out.value();
  if (ds.size() > r.max) fail(check::api, "a receive answered more than it asked");
  std::vector<std::size_t> got;
  std::size_t run = 0;  // the first delivery under the current token
  for (std::size_t i = 0; i < ds.size(); ++i) {
    if (i > 0 && !(ds[i].lease == ds[run].lease)) {
      check_batch_shape(ds, run, i, r.batch);
      run = i;
    }
    delivered(ds[i], r.lease, now, client);
    got.push_back(leases_.size() - 1);
  }
  if (!ds.empty()) check_batch_shape(ds, run, ds.size(), r.batch);
  return got;
}

void answer_checker::check_batch_shape(const std::vector<delivery>& ds, std::size_t from,
                                       std::size_t to, std::uint32_t asked) {
  const auto& first = ds[from];
  auto n = to - from;
  auto text = [&] {
    return "a batch under lease " + to_string(first.lease) + " of " + std::to_string(n) +
           " messages, first " + first.msg.body + ", asked for batches of " + std::to_string(asked);
  };
  if (n != first.lease.batch || n > asked) fail(check::api, text() + ": its size is wrong");
  const auto& group = message_of(first).group;
  if (n > 1 && group.empty()) fail(check::api, text() + ": unordered messages are never batched");
  for (auto i = from; i < to; ++i) {
    if (ds[i].batch_index != i - from)
      fail(check::api, text() + ": " + ds[i].msg.body + " has batch_index " +
                           std::to_string(ds[i].batch_index));
    if (message_of(ds[i]).group != group)
      fail(check::api, text() + ": " + ds[i].msg.body + " is of another group");
  }
  for (std::size_t i = 0; i < from; ++i)
    if (ds[i].lease == first.lease) fail(check::api, text() + ": its lease came twice");
  if (n > 1) ++counts_.batches;
}

answer_checker::msg_rec& answer_checker::message_of(const delivery& d) {
  const auto& text = d.msg.body;
  auto body = text.size() > 1 ? std::strtoull(text.c_str() + 1, nullptr, 10) : 0;
  auto it = msgs_.find(body);
  if (text.empty() || text[0] != 'b' || it == msgs_.end() || !it->second.sent)
    fail(check::api, "delivered a message never sent: '" + text + "'");
  return it->second;
}

std::size_t answer_checker::first_of_arrival(const msg_rec& m) const {
  return m.arrival_lease;
}

/// A delivery as a client read it (answers may be read in another order than the broker gave
/// them: each check looks at the deliveries by the time they were granted).
void answer_checker::delivered(const delivery& d, duration lease, timestamp now,
                               std::size_t client) {
  auto& m = message_of(d);
  auto body = std::strtoull(d.msg.body.c_str() + 1, nullptr, 10);
  learn_id(body, d.msg.id);
  if (m.open > 0) ++counts_.delivered_before_answer;
  ++counts_.deliveries;
  auto granted = d.deadline - lease;
  if (granted > now) fail(check::api, "a delivery with a deadline past its lease");
  if (!m.stored_possible && m.open == 0)
    fail(check::api, "delivered " + b(body) + ", whose every enqueue failed");
  trace("read", d.lease, granted, now, b(body) + (m.group.empty() ? "" : " in " + m.group));
  auto pos = std::upper_bound(m.leases.begin(), m.leases.end(), granted,
                              [&](timestamp t, std::size_t l) { return t < leases_[l].granted; });
  // Read after a redrive was sent, but granted before it: a delivery of the arrival before,
  // whose place in its group is no longer known here.
  bool earlier_arrival = granted < m.arrival_at;
  check_duplicate(m, body, granted);
  check_in_flight(m, granted, d, now);
  if (!earlier_arrival) {
    check_order(m, body, d, granted, first_of_arrival(m) == m.leases.size());
    check_suspicions(m, body, granted);
    check_reclaim(m, body, granted);
  }
  // A retry's not-before binds the next delivery of the same arrival (a redrive starts afresh).
  if (!earlier_arrival && pos - m.leases.begin() > static_cast<std::ptrdiff_t>(m.arrival_lease))
    check_not_before(*(pos - 1), granted);
  if (m.first_sent && granted < *m.first_sent + m.delay)
    fail(check::not_before, b(body) + " delivered at " + at(granted) +
                                ", before its enqueue delay " + "ended at " +
                                at(*m.first_sent + m.delay));
  lease_rec lr;
  lr.d = d;
  lr.body = body;
  lr.client = client;
  lr.run = run_;
  lr.granted = granted;
  lr.deadline = d.deadline;
  leases_.push_back(lr);
  auto l = leases_.size() - 1;
  if (d.lease.batch > 1) batches_[to_string(d.lease)].push_back(l);
  m.leases.insert(pos, l);
  if (earlier_arrival) ++m.arrival_lease;
  if (!m.group.empty()) {
    auto& g = groups_.at(m.group);
    g.leases.push_back(l);
    if (!earlier_arrival) g.delivered.emplace(m.arrival, body);
  }
}

void answer_checker::check_duplicate(const msg_rec& m, std::uint64_t body, timestamp granted) {
  auto first = first_of_arrival(m);
  for (std::size_t i = 0; i < m.leases.size(); ++i) {
    const auto& lr = leases_[m.leases[i]];
    if (lr.granted > granted) continue;  // read out of order: granted later
    if (lr.acked)
      fail(check::duplicate, b(body) + " delivered again after the ack of lease " +
                                 to_string(lr.d.lease) + " was answered OK");
    if (lr.dead && i >= first)
      fail(check::duplicate, b(body) + " delivered again after it was dead-lettered (lease " +
                                 to_string(lr.d.lease) + ") and no redrive of it was sent since");
  }
  if (m.dead_mark && m.dead_mark->first == m.redrives && granted >= m.dead_mark->second)
    fail(check::duplicate, b(body) + " delivered at " + at(granted) +
                               ", though it was a dead letter at " + at(m.dead_mark->second) +
                               " and no redrive of it was sent since");
}

/// Whether lease `l` is surely live at `t`, as far as the clients know: no ack or nack of it
/// was sent (or each was refused), no extend is under way (it sets the deadline to its time of
/// arrival plus its `by`, which may be sooner), its deadline is later, (fast delivery) no restart
/// since, and no op of another lease of its message is under way (it must fail; if it wrongly
/// succeeded, its own answer names the broken rule).
bool answer_checker::live(std::size_t l, timestamp t) const {
  const auto& lr = leases_[l];
  return lr.ends_live == 0 && lr.extends_open == 0 && lr.deadline > t &&
         (cfg_.durable || lr.run == run_) && msgs_.at(lr.body).ends_open == 0;
}

/// No lease read so far overlaps the new one: for each pair, the one granted first was not
/// live when the other was granted (the new one was not ended yet: it was just read).
void answer_checker::check_in_flight(msg_rec& m, timestamp granted, const delivery& d,
                                     timestamp now) {
  auto judge = [&](std::size_t l) {
    const auto& other = leases_[l];
    if (other.d.lease == d.lease) return;  // one ordered batch: its messages go out together
    bool overlap = other.granted <= granted
                       ? live(l, granted)
                       : d.deadline > other.granted && (cfg_.durable || other.run == run_);
    if (overlap)
      fail(check::in_flight, "lease " + to_string(d.lease) + " (message " + d.msg.body +
                                 (m.group.empty() ? "" : ", group " + m.group) + ") granted at " +
                                 at(granted) + ", live until " + at(d.deadline) + ", and lease " +
                                 to_string(other.d.lease) + " (message " + b(other.body) +
                                 ") granted at " + at(other.granted) + ", live until " +
                                 at(other.deadline));
  };
  if (m.group.empty()) {
    for (auto l : m.leases) judge(l);
    return;
  }
  auto& open = groups_.at(m.group).leases;
  auto horizon = now - 4 * longest_lease_;  // leases long over: not worth keeping
  std::erase_if(
      open, [&](std::size_t l) { return leases_[l].confirmed || leases_[l].deadline < horizon; });
  for (auto l : open) judge(l);
}

// -- order ----------------------------------------------------------------------------------------

std::uint64_t answer_checker::attempts_bound(const msg_rec& m) const {
  std::uint64_t seen = 0;
  for (auto i = first_of_arrival(m); i < m.leases.size(); ++i)
    seen = std::max<std::uint64_t>(seen, leases_[m.leases[i]].d.msg.attempts);
  // Each receive whose answer the clients did not read (lost, failed, or not read yet) may have
  // delivered it once more, and that lease may have run out.
  return seen + (hidden_receives_ - m.hidden_base) + receives_.size();
}

bool answer_checker::surely_dead(const msg_rec& m) const {
  return m.dead_mark && m.dead_mark->first == m.redrives && m.redrives_open == 0;
}

answer_checker::blocking answer_checker::blocks(const msg_rec& y) const {
  if (!y.known() || y.place_unknown || y.acked || surely_dead(y)) return blocking::no;
  // An ack or dead-letter nack of a delivery of this arrival was sent (and not refused): of the
  // latest, or of an earlier run's, which may take its held head back (R6).
  for (auto i = first_of_arrival(y); i < y.leases.size(); ++i)
    if (leases_[y.leases[i]].terminal_live > 0) return blocking::no;
  // It may have left its group unseen: a redrive under way (it is then a dead letter or behind),
  // or its last attempt failed (deliveries the clients never read count too).
  if (y.redrives_open > 0 || attempts_bound(y) >= cfg_.max_attempts) return blocking::maybe;
  return blocking::yes;
}

std::string answer_checker::state_of(const msg_rec& y) const {
  std::string out = y.answered ? "its enqueue was answered OK" : "its enqueue was not answered";
  out += ", " + std::to_string(y.leases.size() - first_of_arrival(y)) + " of its " +
         std::to_string(y.leases.size()) + " deliveries read in this arrival, at most " +
         std::to_string(attempts_bound(y)) + " attempts";
  if (!y.leases.empty()) {
    const auto& lr = leases_[y.leases.back()];
    out += ", last lease " + to_string(lr.d.lease) + " granted at " + at(lr.granted) + " run " +
           std::to_string(lr.run) + ", deadline " + at(lr.deadline);
  }
  return out;
}

/// G3: `m` goes out only once every message stored ahead of it in its group was released: an
/// ack or dead-letter nack of its latest delivery was sent. A message that may have died unseen
/// is suspected instead: delivered again later (so it was alive), the order was broken.
void answer_checker::check_order(msg_rec& m, std::uint64_t body, const delivery& d,
                                 timestamp granted, bool first_in_arrival) {
  if (m.group.empty() || m.place_unknown) return;
  auto& g = groups_.at(m.group);
  for (auto it = g.by_arrival.begin(); it != g.by_arrival.end() && it->first < m.arrival;) {
    auto& y = msgs_.at(it->second);
    if (y.acked) {
      it = g.by_arrival.erase(it);  // gone for good: never ahead of anything again
      continue;
    }
    // Ahead of it in the same ordered batch: they went out together, in order (its delivery under
    // that token was read just before this one, though a later one may have been read first).
    if (std::any_of(y.leases.begin(), y.leases.end(), [&](std::size_t l) {
          const auto& other = leases_[l].d;
          return other.lease == d.lease && other.batch_index < d.batch_index;
        })) {
      ++it;
      continue;
    }
    auto text = [&] {
      return "group " + m.group + ": " + b(body) + " delivered at " + at(granted) + " while " +
             b(it->second) + ", stored ahead of it, was not released (" + state_of(y) + ")";
    };
    auto state = blocks(y);
    if (state == blocking::yes) fail(check::order, text());
    if (state == blocking::maybe &&
        (!y.suspected || y.suspected->arrival != y.arrival || y.suspected->granted > granted)) {
      y.suspected = suspicion{body, y.arrival, granted, text()};
      ++counts_.suspicions;
    }
    ++it;
  }
  if (first_in_arrival) check_later_went_first(m, body, granted);
}

/// `m`, stored ahead of the later messages of its group, is delivered for the first time since
/// it arrived: none of them went out before (it was in the group all along).
void answer_checker::check_later_went_first(const msg_rec& m, std::uint64_t body,
                                            timestamp granted) {
  const auto& g = groups_.at(m.group);
  for (auto it = g.delivered.upper_bound(m.arrival); it != g.delivered.end(); ++it) {
    const auto& z = msgs_.at(it->second);
    if (z.place_unknown || z.arrival != it->first) continue;
    for (auto i = first_of_arrival(z); i < z.leases.size(); ++i)
      if (leases_[z.leases[i]].granted < granted)
        fail(check::order, "group " + m.group + ": " + b(it->second) + " delivered at " +
                               at(leases_[z.leases[i]].granted) + ", before " + b(body) +
                               ", stored ahead of it, was first delivered at " + at(granted));
  }
}

void answer_checker::check_suspicions(msg_rec& m, std::uint64_t body, timestamp granted) {
  if (!m.suspected || m.suspected->arrival != m.arrival || m.place_unknown) return;
  if (granted > m.suspected->granted)
    fail(check::order, m.suspected->what + " (it may have been dead then, but it was delivered " +
                           "again at " + at(granted) + ")");
  (void)body;
}

/// A delivery granted at `granted` after lease `l` is not earlier than `l`'s retry nack allows.
void answer_checker::check_not_before(std::size_t l, timestamp granted) {
  const auto& lr = leases_[l];
  if (lr.not_before && granted < *lr.not_before)
    fail(check::not_before, "message " + b(lr.body) + " delivered at " + at(granted) +
                                ", before the retry_after of its nack of lease " +
                                to_string(lr.d.lease) + " ended at " + at(*lr.not_before));
}

/// R6: after a restart with a reclaim grace, a group stored before it delivers nothing within
/// the grace unless an old lease of the group was presented (its held head reclaimed).
void answer_checker::check_reclaim(const msg_rec& m, std::uint64_t body, timestamp granted) {
  if (cfg_.durable || cfg_.reclaim_grace <= duration{0} || m.group.empty() || run_ == 1) return;
  if (granted >= run_start_ + cfg_.reclaim_grace || m.arrival >= run_start_arrival_ ||
      m.place_unknown || groups_.at(m.group).reclaim_run == run_)
    return;
  fail(check::reclaim,
       b(body) + " (group " + m.group + "), stored before the restart at " + at(run_start_) +
           ", delivered at " + at(granted) +
           " within the reclaim grace, and no old lease of its group was presented");
}

// -- acks, nacks, extends -------------------------------------------------------------------------

bool answer_checker::reclaimable(const lease_rec& lr, timestamp t) const {
  // Sent while the run recovers, it is handled when the recovery ends: within the grace.
  return !cfg_.durable && cfg_.reclaim_grace > duration{0} && lr.run < run_ &&
         run_ - lr.run <= reclaim_epochs && !msgs_.at(lr.body).group.empty() &&
         (!serving_ || t < run_start_ + cfg_.reclaim_grace);
}

/// Why an ack, nack or extend of lease `l` sent at `t` must fail; empty if it may succeed.
std::string answer_checker::must_fail(std::size_t l, timestamp t) const {
  const auto& lr = leases_[l];
  const auto& m = msgs_.at(lr.body);
  if (lr.confirmed) return "an ack or nack of it was answered OK before";
  // Within the grace, or after an op that may have taken its held head (or its batch) back, its
  // answer not read yet.
  int reclaims = lr.reclaim_maybe == run_ ? 1 : 0;
  for (auto x : batch_of(l)) reclaims += leases_[x].reclaims_open;
  if (reclaimable(lr, t) || (lr.run < run_ && reclaims > 0)) return reclaim_refused(m, l);
  if (!cfg_.durable && lr.run < run_) return "it is from an earlier run and delivery is fast";
  if (later_lease(m, l) != m.leases.end()) return "its message was delivered again since";
  if (lr.extends_open == 0 && t >= lr.deadline_max.value_or(lr.deadline))
    return "it was sent at or after its deadline";
  return {};
}

std::vector<std::size_t> answer_checker::batch_of(std::size_t l) const {
  const auto& token = leases_[l].d.lease;
  if (token.batch < 2) return {l};
  auto it = batches_.find(to_string(token));
  return it == batches_.end() ? std::vector<std::size_t>{l} : it->second;
}

void answer_checker::taken_back(std::size_t l, timestamp now) {
  // Durable: the lease committed before the restart is honoured (R7). Fast: the held head and the
  // batch behind it were taken back by this op or another of the batch's since the run started
  // (R6), and run for the queue's lease from then on.
  for (auto x : batch_of(l)) {
    auto& o = leases_[x];
    if (o.run >= run_) continue;
    o.run = run_;
    if (cfg_.durable || cfg_.lease.count() == 0) continue;
    o.deadline = run_start_ + cfg_.lease;
    o.deadline_max = now + cfg_.lease;
  }
}

/// The first delivery of `m` after lease `l` that ends it: any later one with durable delivery;
/// with fast delivery one of this run (those of earlier runs ended with them, and `l`, if of an
/// earlier run, may have taken its held head back: R6).
std::vector<std::size_t>::const_iterator answer_checker::later_lease(const msg_rec& m,
                                                                     std::size_t l) const {
  auto next = std::find(m.leases.begin(), m.leases.end(), l) + 1;
  if (cfg_.durable) return next;
  return std::find_if(next, m.leases.end(), [&](std::size_t x) { return leases_[x].run == run_; });
}

/// Why an old run's token, presented within the reclaim grace, must fail; empty if it may take
/// its held head back. Fast delivery stores no attempt that did not end, so a delivery of the
/// same attempt in a later run that crashed too leaves the token valid (recovery.md R6): only a
/// delivery in this run, an ack, or a redrive (a new seq) ends its claim for sure.
std::string answer_checker::reclaim_refused(const msg_rec& m, std::size_t l) const {
  if (m.acked) return "its message was acked";
  auto i =
      static_cast<std::size_t>(std::find(m.leases.begin(), m.leases.end(), l) - m.leases.begin());
  // A redrive whose outcome a crash cut may not have happened (nor the dead-letter move before it).
  if (i < m.arrival_lease && !m.place_unknown && m.redrives_open == 0)
    return "its message was redriven since";
  for (auto j = i + 1; j < m.leases.size(); ++j)
    if (leases_[m.leases[j]].run == run_) return "its message was delivered again in this run";
  return {};
}

std::uint64_t answer_checker::end_sent(std::size_t l, end_kind k, timestamp now,
                                       duration retry_after, duration by) {
  auto& lr = leases_[l];
  auto& m = msgs_.at(lr.body);
  if (k == end_kind::extend && lr.extends_open > 0) return 0;  // one at a time
  auto op = next_op_++;
  // May fail without a broken rule: another ack or nack of this lease is under way, a restart
  // came since, an ack, nack or extend of another lease of the message is under way, or one that
  // must fail of a lease of its group (a batch covers several messages): it must fail; if it
  // wrongly succeeded, its answer says so.
  auto* g = m.group.empty() ? nullptr : &groups_.at(m.group);
  bool may_fail = lr.ends_live > 0 || lr.run != run_ || lr.extends_open > 0 || m.ends_open > 0 ||
                  (g && g->doomed_open > 0);
  end_op e{l, k, now, lr.deadline, retry_after, by, must_fail(l, now), may_fail};
  if (g && !e.must_fail.empty()) ++g->doomed_open;
  e.reclaim = e.must_fail.empty() && lr.run < run_ && !cfg_.durable;
  if (e.reclaim) ++lr.reclaims_open;
  if (k == end_kind::extend) ++lr.extends_open;  // open for good if a crash drops it
  if (k != end_kind::extend) ++lr.ends_live;
  if (k == end_kind::ack || k == end_kind::dead) ++lr.terminal_live;
  ++m.ends_open;
  if (lr.run < run_ && !m.group.empty()) groups_.at(m.group).reclaim_run = run_;
  ends_.emplace(op, std::move(e));
  return op;
}

std::string answer_checker::describe(const end_op& e) const {
  const auto& lr = leases_[e.lease];
  return std::string{what(e.kind)} + " of lease " + to_string(lr.d.lease) + " (message " +
         b(lr.body) + ", deadline " + at(e.deadline) + "), sent at " + at(e.sent) + ",";
}

void answer_checker::end_answered(std::uint64_t op, const status& st, timestamp extended_to,
                                  timestamp now, bool alone) {
  auto node = ends_.extract(op);
  if (node.empty()) return;  // cut by a crash
  const auto& e = node.mapped();
  auto& lr = leases_[e.lease];
  --msgs_.at(lr.body).ends_open;
  if (const auto& group = msgs_.at(lr.body).group; !group.empty() && !e.must_fail.empty())
    --groups_.at(group).doomed_open;
  if (e.reclaim) --lr.reclaims_open;
  trace(what(e.kind), lr.d.lease, e.sent, now,
        b(lr.body) + " " +
            (st ? "ok" + (e.kind == end_kind::extend ? " -> " + at(extended_to) : std::string{})
                : to_string(st.err())));
  if (e.kind == end_kind::ack && e.sent < e.deadline && now >= e.deadline)
    ++counts_.acks_racing_expiry;
  if (!st && st.err().code == errc::storage_failed) {
    // Its write failed, so it was taken (an op refused for its lease writes nothing); in a batch
    // the failed write may be the others'.
    if (alone && !e.must_fail.empty())
      fail(check::stale_lease,
           describe(e) + " was taken (" + to_string(st.err()) + "), but " + e.must_fail);
    // An old run's lease taken, or in a batch ack perhaps taken: its held head (and batch) may be
    // its holder's again in this run.
    if (e.reclaim && alone && leases_[e.lease].run < run_) {
      ++counts_.reclaims;
      taken_back(e.lease, now);
    } else if (e.reclaim) {
      for (auto x : batch_of(e.lease)) leases_[x].reclaim_maybe = run_;
    }
    return end_unknown(e);
  }
  if (e.kind == end_kind::extend) --lr.extends_open;
  if (!st) return refused(e, st.err(), now);
  ended_ok(e, extended_to, now);
}

/// The store failed the write: the change stands in memory and is written again, unless a crash
/// comes first. Its outcome is unknown, as if a crash had cut the answer.
void answer_checker::end_unknown(const end_op& e) {
  ++counts_.ends_cut;
  if (e.kind == end_kind::ack || e.kind == end_kind::dead) leases_[e.lease].terminal_unknown = true;
}

void answer_checker::ended_ok(const end_op& e, timestamp extended_to, timestamp now) {
  auto& lr = leases_[e.lease];
  auto& m = msgs_.at(lr.body);
  if (!e.must_fail.empty())
    fail(check::stale_lease, describe(e) + " succeeded, but " + e.must_fail);
  if (lr.run < run_) {
    // An old run's lease: durable, honoured after the restart (R7); fast, it took its held head
    // back (R6). Either way it lives in this run now, with every message of its batch.
    ++(cfg_.durable ? counts_.old_durable_leases : counts_.reclaims);
    taken_back(e.lease, now);
  }
  auto next = later_lease(m, e.lease);
  // Delivered again in the same arrival: a delivery after a redrive of it (a dead letter whose
  // move this answer confirms, listed and redriven before the answer was read) is a new arrival.
  auto first_of_next = m.leases.begin() + static_cast<std::ptrdiff_t>(m.arrival_lease);
  bool again = next != m.leases.end() &&
               !(next >= first_of_next &&
                 std::find(m.leases.begin(), first_of_next, e.lease) != first_of_next);
  switch (e.kind) {
    case end_kind::ack:
    case end_kind::dead:
      if (again)
        fail(check::stale_lease, describe(e) + " succeeded, but its message was delivered " +
                                     "again under lease " + to_string(leases_[*next].d.lease) +
                                     " before the answer");
      lr.confirmed = true;
      (e.kind == end_kind::ack ? lr.acked : lr.dead) = true;
      if (e.kind == end_kind::ack) {
        m.acked = true;
        ++counts_.acks;
      }
      break;
    case end_kind::retry:
      lr.confirmed = true;
      lr.not_before = e.sent + e.retry_after;
      if (again) check_not_before(e.lease, leases_[*next].granted);
      break;
    case end_kind::release:
      lr.confirmed = true;  // back in its group behind the message that failed, not attempted
      break;
    case end_kind::extend:
      if (now == e.sent && extended_to != now + e.by)
        fail(check::api, describe(e) + " answered the deadline " + at(extended_to));
      lr.deadline = extended_to;
      lr.deadline_max.reset();
      if (lr.ends_live > 0) break;  // an ack or nack of it went out: it may have ended
      for (auto it = next; it != m.leases.end(); ++it)
        if (leases_[*it].granted < extended_to)
          fail(check::in_flight, describe(e) + " extended it to " + at(extended_to) +
                                     ", but lease " + to_string(leases_[*it].d.lease) +
                                     " of the same message was granted before that");
      break;
  }
}

void answer_checker::refused(const end_op& e, const error& err, timestamp now) {
  auto& lr = leases_[e.lease];
  if (e.kind != end_kind::extend) --lr.ends_live;
  if (e.kind == end_kind::ack || e.kind == end_kind::dead) --lr.terminal_live;
  // A batch's count or from out of range is checked after the lease: an op whose lease must be
  // stale and that gets this far was taken for live.
  if (err.code == errc::invalid_argument && !e.must_fail.empty())
    fail(check::stale_lease, describe(e) + " failed: " + to_string(err) +
                                 ", so its lease was taken for live, but " + e.must_fail);
  if (err.code != errc::lease_not_found && err.code != errc::lease_expired)
    fail(check::api, describe(e) + " failed: " + to_string(err));
  ++counts_.stale_refused;
  // Sent before the deadline and answered at the same instant, of the current lease of this
  // run, with nothing else under way for it: the broker saw a live lease.
  bool current_lease = msgs_.at(lr.body).leases.back() == e.lease;
  if (e.must_fail.empty() && !e.may_fail && current_lease && now == e.sent && e.sent < e.deadline &&
      lr.run == run_)
    fail(check::live_lease, describe(e) + " failed at once: " + to_string(err));
}

// -- dead letters ---------------------------------------------------------------------------------

void answer_checker::dead_listed(const std::vector<dead_letter>& dls, timestamp now) {
  for (const auto& dl : dls) {
    const auto& text = dl.msg.body;
    auto body = text.size() > 1 ? std::strtoull(text.c_str() + 1, nullptr, 10) : 0;
    auto it = msgs_.find(body);
    if (text.empty() || text[0] != 'b' || it == msgs_.end() || !it->second.sent)
      fail(check::api, "a dead letter never sent: '" + text + "'");
    learn_id(body, dl.msg.id);
    auto& m = it->second;
    if (m.acked)
      fail(check::duplicate, b(body) + " is listed as a dead letter, but its ack was answered OK");
    m.stored_possible = true;
    if (m.redrives_open == 0) m.dead_mark = std::pair{m.redrives, now};
  }
}

std::uint64_t answer_checker::redrive_sent(const std::vector<message_id>& ids, timestamp now) {
  auto op = next_op_++;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> bodies;
  for (auto id : ids) {
    auto body = body_of(id);
    if (body == 0) fail(check::api, "the driver redrives an id it never saw");
    auto& m = msgs_.at(body);
    if (m.redrives_open == 0) {
      m.before_redrives = current_arrival(m);
      m.redrive_places.clear();
      m.redrive_won.reset();
    }
    ++m.redrives;
    ++m.redrives_open;
    // If it succeeds, a new arrival: a new place at the end of its group (O9), attempts from 0.
    m.arrival_at = now;
    m.arrival_lease = m.leases.size();
    m.hidden_base = hidden_receives_;
    m.suspected.reset();
    place(body, next_arrival_++);
    m.redrive_places[m.redrives] = current_arrival(m);
    bodies.emplace_back(body, m.redrives);
    note(now, "redrive " + b(body));
  }
  redrives_.emplace(op, std::move(bodies));
  return op;
}

void answer_checker::redrive_answered(std::uint64_t op, const result<std::uint64_t>& n,
                                      timestamp now) {
  auto node = redrives_.extract(op);
  if (node.empty()) return;
  const auto& bodies = node.mapped();
  for (auto [body, nth] : bodies) --msgs_.at(body).redrives_open;
  if (cfg_.trace) {
    std::string text = "redrive answered:";
    for (auto [body, nth] : bodies) text += " " + b(body);
    note(now, text + ": " + (n ? std::to_string(n.value()) : to_string(n.err())));
  }
  if (!n) {
    // A failed redrive changes nothing: its messages stay dead letters in their arrival (and a
    // crash that undoes a dead-letter move it found uncommitted puts one back in its place).
    // Unless another redrive of one is under way: that one decides (an earlier one may succeed
    // after a later one failed, the later one's read having met the store's failure first).
    if (n.err().code != errc::storage_failed)
      fail(check::api, "redrive failed: " + to_string(n.err()));
    for (auto [body, nth] : bodies) {
      undo_redrive(body, nth);
      auto& m = msgs_.at(body);
      if (m.redrives_open == 0) m.dead_mark = std::pair{m.redrives, now};
    }
    return;
  }
  for (auto [body, nth] : bodies) {
    auto& m = msgs_.at(body);
    if (auto it = m.redrive_places.find(nth); it != m.redrive_places.end()) {
      if (!m.redrive_won || m.redrive_won->first < nth) m.redrive_won = std::pair{nth, it->second};
      m.redrive_places.erase(it);
    }
  }
  if (n.value() != bodies.size())
    fail(check::api, "a redrive of " + std::to_string(bodies.size()) + " dead letters answered " +
                         std::to_string(n.value()));
}

// -- crashes and the end --------------------------------------------------------------------------

void answer_checker::crash(timestamp now) {
  for (auto& [op, e] : ends_) {
    ++counts_.ends_cut;
    --msgs_.at(leases_[e.lease].body).ends_open;
    if (e.reclaim) --leases_[e.lease].reclaims_open;
    if (e.kind == end_kind::ack || e.kind == end_kind::dead)
      leases_[e.lease].terminal_unknown = true;
  }
  ends_.clear();
  for (auto& [name, g] : groups_) g.doomed_open = 0;
  for (auto& [op, bodies] : enqueues_) {
    ++counts_.enqueues_cut;
    for (auto body : bodies) {
      auto& m = msgs_.at(body);
      --m.open;
      m.stored_possible = true;
    }
  }
  enqueues_.clear();
  enqueues_open_ = 0;
  hidden_receives_ += receives_.size();  // answers lost with their deliveries
  receives_.clear();
  for (auto& [op, bodies] : redrives_)
    for (auto [body, nth] : bodies) {
      auto& m = msgs_.at(body);
      --m.redrives_open;
      m.redrive_places.erase(nth);
      m.place_unknown = true;
    }
  redrives_.clear();
  // A listing shows the dead letters in memory: a move the crash found uncommitted is undone.
  for (auto& [body, m] : msgs_) m.dead_mark.reset();
  note(now, "crash");
  ++run_;  // every answer not yet read is lost with its connection
  run_start_ = now;
  run_start_arrival_ = next_arrival_;
  serving_ = false;
}

void answer_checker::recovered(timestamp now) {
  note(now, "recovered");
  run_start_ = now;
  serving_ = true;
}

void answer_checker::judge_drain(const std::set<message_id>& dead) {
  for (const auto& [body, m] : msgs_) {
    if (!m.known() || m.acked) continue;
    // An ack or dead-letter nack of this arrival whose outcome is unknown (of its latest lease,
    // or of an earlier run's that may have taken its held head back, R6), or one answered OK.
    bool ended = false;
    for (auto i = first_of_arrival(m); i < m.leases.size(); ++i) {
      const auto& lr = leases_[m.leases[i]];
      ended = ended || lr.terminal_unknown || lr.dead;
    }
    if (ended) continue;
    if (m.id && dead.count(*m.id)) continue;
    fail(check::lost, "message " + b(body) +
                          (m.answered ? " (enqueue answered OK" : " (delivered") + ", delivered " +
                          std::to_string(m.leases.size()) +
                          " times) is neither acked nor dead after the drain");
  }
}

}  // namespace laneq::sim
