// laneq_memtable_bench: RocksDB's memtable insert cost under the store's key pattern, without the
// broker. Messages are put at the end of their lane (`M uid lane seq`, codec::message_key) in
// batches of enqueues, and each lane's head is removed in batches of acks, over many interleaved
// lanes with a steady backlog. It reports the key comparisons and the time per put and per
// removal for the store's memtable (persistence_memtable.hpp) or RocksDB's skip list with a choice
// of insert hints (make_db_options in actors/src/persistence.cpp)
// and of removal records. No reads: only the write path that the store thread repeats for every
// message; with --sync=1 each batch is written with its WAL synced, as the store's group commit
// does, so the run is what RocksDB itself does with the store's write pattern and batch sizes
// (issue 23's durable target compares laneq_engine_bench against it). Results are JSON on stdout
// (benchmarks/README.md).
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "laneq/actors/persistence_memtable.hpp"
#include "laneq/codec.hpp"

namespace {

struct config {
  std::string dir;
  std::string hint = "lane";      // with the skip list: none | lane (ADR 0005's) | lane-seq
  std::string removal = "erase";  // erase | floor
  std::string order = "arrival";  // arrival | sorted (each batch's operations by key)
  std::string rep = "lanes";      // lanes (the store's, persistence_memtable.hpp) | skiplist
  std::size_t mixed = 0;          // 1: enqueues and acks in one batch, as a group commit writes
  std::size_t lanes = 1000;
  std::size_t backlog = 100;  // messages waiting per lane in the steady state
  std::size_t messages = 1000000;
  std::size_t enqueue_batch = 1000;
  std::size_t ack_batch = 300;
  std::size_t body_bytes = 400;  // about a 256-byte body with its headers, encoded
  std::size_t memtable_mb = 64;  // write_buffer_size
  std::size_t sync = 0;          // 1: every batch is written with WriteOptions::sync
  std::uint64_t seed = 1;
};

void usage() {
  std::cerr
      << "usage: laneq_memtable_bench --dir=DIR [--rep=lanes|skiplist] "
         "[--hint=none|lane|lane-seq|queue] "
         "[--removal=erase|floor]\n"
         "         [--order=arrival|sorted] [--mixed=0|1]\n"
         "         [--lanes=N] [--backlog=N] [--messages=N] [--enqueue-batch=N] "
         "[--ack-batch=N]\n"
         "         [--body-bytes=N] [--memtable-mb=N] [--sync=0|1] [--seed=N]\n"
         "  dir:     the database goes into DIR/laneq-memtable-bench-<pid>, removed at the end\n"
         "  rep:     the memtable: lanes, partitioned by lane (the store's, ADR 0008), or\n"
         "           RocksDB's skip list (with --hint)\n"
         "  hint:    with the skip list, memtable_insert_with_hint_prefix_extractor: none; the\n"
         "           25-byte lane prefix (ADR 0005's); or the lane prefix and the seq's top 6\n"
         "           bytes (not kept); or\n"
         "           the queue's 9-byte prefix (one hint for all its messages)\n"
         "  order:   each batch's operations as they come, or sorted by key\n"
         "  mixed:   1: enqueues and acks in one batch (as the store's group commit)\n"
         "  sync:    1: each batch's WAL write is synced before the next (the store's durability)\n"
         "  removal: erase: a tombstone per removed message (the store's layout); floor: one\n"
         "           overwritten per-lane record instead (a design not built, for comparison)\n";
}

bool parse(int argc, char** argv, config& c) {
  static const std::pair<std::string_view, std::string config::*> texts[] = {
      {"dir", &config::dir},
      {"hint", &config::hint},
      {"removal", &config::removal},
      {"order", &config::order},
      {"rep", &config::rep}};
  static const std::pair<std::string_view, std::size_t config::*> numbers[] = {
      {"lanes", &config::lanes},
      {"backlog", &config::backlog},
      {"messages", &config::messages},
      {"enqueue-batch", &config::enqueue_batch},
      {"ack-batch", &config::ack_batch},
      {"body-bytes", &config::body_bytes},
      {"mixed", &config::mixed},
      {"memtable-mb", &config::memtable_mb},
      {"sync", &config::sync}};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    auto eq = arg.find('=');
    if (!arg.starts_with("--") || eq == std::string_view::npos) return false;
    auto name = arg.substr(2, eq - 2);
    std::string value{arg.substr(eq + 1)};
    auto known = false;
    for (const auto& [flag, field] : texts) {
      if (name != flag) continue;
      c.*field = value;
      known = true;
    }
    for (const auto& [flag, field] : numbers) {
      if (name != flag) continue;
      c.*field = static_cast<std::size_t>(std::stoull(value));
      known = true;
    }
    if (name == "seed") {
      c.seed = std::stoull(value);
      known = true;
    }
    if (!known) return false;
  }
  if (c.dir.empty() || c.memtable_mb == 0 || c.lanes == 0 || c.backlog == 0 ||
      c.enqueue_batch == 0 || c.ack_batch == 0)
    return false;
  if (c.hint != "none" && c.hint != "lane" && c.hint != "lane-seq" && c.hint != "queue")
    return false;
  if (c.order != "arrival" && c.order != "sorted") return false;
  if (c.rep != "lanes" && c.rep != "skiplist") return false;
  return c.removal == "erase" || c.removal == "floor";
}

laneq::codec::lane_id lane_of(std::size_t i) {
  return laneq::codec::make_lane_id("bench", "group-" + std::to_string(i));
}

struct tally {
  std::uint64_t ops = 0;
  std::uint64_t comparisons = 0;
  std::chrono::nanoseconds time{0};
};

/// CPU time in nanoseconds of this process's threads whose name starts with `prefix`
/// (/proc/self/task/*/schedstat). RocksDB names its background threads after their pool:
/// `rocksdb:high` runs flushes, `rocksdb:low` compactions; both live as long as the database.
std::uint64_t threads_cpu_ns(std::string_view prefix) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator{"/proc/self/task", ec}) {
    std::ifstream comm{task.path() / "comm"};
    std::string name;
    std::getline(comm, name);
    if (!name.starts_with(prefix)) continue;
    std::ifstream stat{task.path() / "schedstat"};
    std::uint64_t on_cpu = 0;
    if (stat >> on_cpu) total += on_cpu;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  try {
    if (!parse(argc, argv, c)) {
      usage();
      return 2;
    }
  } catch (const std::exception&) {
    usage();
    return 2;
  }
  // A directory of its own under --dir, removed afterwards; --dir itself is never touched.
  const auto db_dir =
      (std::filesystem::path{c.dir} / ("laneq-memtable-bench-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(db_dir);
  rocksdb::Options o;
  o.create_if_missing = true;
  o.write_buffer_size = c.memtable_mb << 20;
  o.compression = rocksdb::kLZ4Compression;
  o.allow_concurrent_memtable_write = false;
  constexpr std::size_t lane_prefix = laneq::codec::message_key_lane_prefix_bytes;
  if (c.rep == "lanes")
    o.memtable_factory = laneq::make_lane_memtable_factory(lane_prefix);
  else if (c.hint == "lane")
    o.memtable_insert_with_hint_prefix_extractor.reset(
        rocksdb::NewFixedPrefixTransform(lane_prefix));
  else if (c.hint == "lane-seq")
    o.memtable_insert_with_hint_prefix_extractor.reset(
        rocksdb::NewFixedPrefixTransform(lane_prefix + 6));
  else if (c.hint == "queue")  // tag and uid: one hint for all of a queue's messages
    o.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(1 + 8));
  rocksdb::DB* raw = nullptr;
  std::error_code ec;
  std::filesystem::create_directories(c.dir, ec);
  if (auto s = rocksdb::DB::Open(o, db_dir, &raw); !s.ok()) {
    std::cerr << "laneq_memtable_bench: cannot open " << db_dir << ": " << s.ToString() << "\n";
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db{raw};
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);

  std::vector<laneq::codec::lane_id> lanes;
  for (std::size_t i = 0; i < c.lanes; ++i) lanes.push_back(lane_of(i));
  std::vector<std::deque<std::uint64_t>> waiting(c.lanes);
  std::mt19937_64 rng{c.seed};
  std::string body(c.body_bytes, '\0');
  for (auto& ch : body) ch = static_cast<char>(rng());
  const std::string floor_value(16, 'f');  // a seq and a checksum

  rocksdb::WriteOptions wo;
  wo.sync = c.sync != 0;
  std::uint64_t writes = 0;
  auto write = [&db, &wo, &writes](rocksdb::WriteBatch& b, tally& t) {
    if (b.Count() == 0) return true;
    ++writes;
    auto before = rocksdb::get_perf_context()->user_key_comparison_count;
    auto start = std::chrono::steady_clock::now();
    auto s = db->Write(wo, &b);
    t.time += std::chrono::steady_clock::now() - start;
    t.comparisons += rocksdb::get_perf_context()->user_key_comparison_count - before;
    t.ops += b.Count();
    if (!s.ok()) std::cerr << "laneq_memtable_bench: write failed: " << s.ToString() << "\n";
    return s.ok();
  };

  tally puts;
  tally removals;
  std::uint64_t seq = 0;
  std::size_t live = 0;
  std::size_t removed = 0;
  struct op {
    std::string key;
    bool put = true;  // false: a tombstone
    std::string_view value;
  };
  // Writes `ops` as one batch: in the order given, or sorted by key (stable: one key's
  // operations keep their order, as the store would have to).
  auto apply = [&](std::vector<op>& ops, tally& t) {
    if (c.order == "sorted")
      std::stable_sort(ops.begin(), ops.end(),
                       [](const op& a, const op& b) { return a.key < b.key; });
    rocksdb::WriteBatch b;
    for (const auto& each : ops) {
      if (each.put)
        b.Put(each.key, rocksdb::Slice{each.value.data(), each.value.size()});
      else
        b.Delete(each.key);
    }
    return write(b, t);
  };
  tally mixed;
  const auto began = std::chrono::steady_clock::now();
  while (removed < c.messages) {
    std::vector<op> enqueue;
    if (live < c.lanes * c.backlog && seq < c.messages) {
      for (std::size_t i = 0; i < c.enqueue_batch && seq < c.messages; ++i) {
        auto lane = static_cast<std::size_t>(rng() % c.lanes);
        waiting[lane].push_back(++seq);
        enqueue.push_back(
            op{laneq::codec::message_key(0, lanes[lane], laneq::message_seq{seq}), true, body});
        ++live;
      }
    }
    // One ack per lane at most (one message in flight per group), starting at a random lane.
    std::vector<op> ack;
    auto first = static_cast<std::size_t>(rng() % c.lanes);
    for (std::size_t i = 0, n = 0; i < c.lanes && n < c.ack_batch; ++i) {
      auto lane = (first + i) % c.lanes;
      if (waiting[lane].empty()) continue;
      auto head = waiting[lane].front();
      waiting[lane].pop_front();
      auto key = laneq::codec::message_key(0, lanes[lane], laneq::message_seq{head});
      if (c.removal == "erase") {
        ack.push_back(op{std::move(key), false, {}});
      } else {
        key[0] = 'W';  // a per-lane record of its own: tag, uid, lane
        key.resize(lane_prefix);
        ack.push_back(op{std::move(key), true, floor_value});
      }
      ++n;
      --live;
      ++removed;
    }
    if (c.mixed != 0) {
      for (auto& each : ack) enqueue.push_back(std::move(each));
      if (!apply(enqueue, mixed)) return 1;
    } else if (!apply(enqueue, puts) || !apply(ack, removals)) {
      return 1;
    }
  }
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  // The background work the run left behind is part of its cost: the last memtable is flushed
  // and the compactions it leads to are waited for (RocksDB 7.8 has no WaitForCompact).
  db->Flush(rocksdb::FlushOptions{});
  for (std::uint64_t busy = 1; busy != 0;) {
    std::uint64_t running = 0, pending = 0;
    db->GetIntProperty("rocksdb.num-running-compactions", &running);
    db->GetIntProperty("rocksdb.compaction-pending", &pending);
    busy = running + pending;
    if (busy != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto background_us = [&](std::string_view pool) {
    return static_cast<double>(threads_cpu_ns(pool)) / 1e3 / static_cast<double>(removed);
  };
  auto per = [](const tally& t, auto x) {
    return t.ops == 0 ? 0.0 : static_cast<double>(x) / static_cast<double>(t.ops);
  };
  std::printf(
      "{\n  \"benchmark\": \"laneq_memtable_bench\",\n  \"config\": {\"rep\": \"%s\", \"hint\": "
      "\"%s\", "
      "\"removal\": \"%s\", \"order\": \"%s\", \"mixed\": %s, \"lanes\": %zu, "
      "\"backlog\": %zu, \"messages\": %zu, \"enqueue_batch\": %zu, \"ack_batch\": %zu, "
      "\"body_bytes\": %zu, \"memtable_mb\": %zu, \"sync\": %s, \"seed\": %llu},\n"
      "  \"seconds\": %.3f, \"messages_per_s\": %.0f, \"writes\": %llu, "
      "\"messages_per_write\": %.1f,\n"
      "  \"flush_cpu_us_per_message\": %.3f, \"compaction_cpu_us_per_message\": %.3f,\n"
      "  \"puts\": {\"ops\": %llu, \"comparisons_per_op\": %.1f, \"us_per_op\": %.3f},\n"
      "  \"removals\": {\"ops\": %llu, \"comparisons_per_op\": %.1f, \"us_per_op\": %.3f},\n"
      "  \"mixed\": {\"ops\": %llu, \"comparisons_per_op\": %.1f, \"us_per_op\": %.3f}\n}\n",
      c.rep.c_str(), c.rep == "lanes" ? "none" : c.hint.c_str(), c.removal.c_str(), c.order.c_str(),
      c.mixed != 0 ? "true" : "false", c.lanes, c.backlog, c.messages, c.enqueue_batch, c.ack_batch,
      c.body_bytes, c.memtable_mb, c.sync != 0 ? "true" : "false",
      static_cast<unsigned long long>(c.seed), seconds, static_cast<double>(removed) / seconds,
      static_cast<unsigned long long>(writes),
      writes == 0 ? 0.0 : static_cast<double>(removed) / static_cast<double>(writes),
      background_us("rocksdb:high"), background_us("rocksdb:low"),
      static_cast<unsigned long long>(puts.ops), per(puts, puts.comparisons),
      per(puts, puts.time.count()) / 1000.0, static_cast<unsigned long long>(removals.ops),
      per(removals, removals.comparisons), per(removals, removals.time.count()) / 1000.0,
      static_cast<unsigned long long>(mixed.ops), per(mixed, mixed.comparisons),
      per(mixed, mixed.time.count()) / 1000.0);
  db.reset();
  std::filesystem::remove_all(db_dir);
  return 0;
}
