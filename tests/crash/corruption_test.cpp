// T9 (RELIABILITY.md, G7): corruption found at start. A flipped byte anywhere in the write-ahead
// log (each of its bytes is tried) must make spawn_persistence refuse with corrupt_record, never
// open; a torn tail left by a write that was never acknowledged must open with every
// acknowledged write.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "crash_support.hpp"
#include "fault_fs.hpp"

namespace laneq::test {
namespace {

namespace stdfs = std::filesystem;

class Corruption : public ::testing::Test {
 protected:
  static constexpr int n_keys = 50;

  static std::string key(int i) { return "k" + std::to_string(1000 + i); }
  static std::string value(int i) { return "value-" + std::to_string(i) + std::string(40, 'x'); }

  /// Writes n_keys synced keys, one write each, then loses power: the store never flushes its
  /// memtable, so the WAL is the only copy of the data and RocksDB must replay it at open.
  /// With `torn_write`, one more write is sent while syncs fail: its record reaches the WAL but
  /// is never acknowledged. Returns the WAL's path.
  std::string write_then_lose_power(const std::string& db, bool torn_write,
                                    std::uint64_t* synced = nullptr) {
    auto fs = std::make_shared<fault_fs>();
    persistence_options opts;
    opts.dir = db;
    opts.env = make_env(fs);
    auto spawned = spawn_persistence(sys_, opts);
    EXPECT_TRUE(spawned.ok()) << to_string(spawned.err());
    if (!spawned.ok()) return {};
    {
      store_client c{sys_, spawned.value()};
      for (int i = 0; i < n_keys; ++i) EXPECT_TRUE(c.write({put(key(i), value(i))}).ok());
      if (torn_write) {
        fs->inject(fault_kind::io_error, fault_scope::sync_only);
        auto st = c.write({put("torn", std::string(200, 't'))});
        EXPECT_FALSE(st.ok()) << "the torn write must not be acknowledged";
      }
    }
    fs->lose_power();
    stop(sys_, spawned.value());
    auto wal = find_wal(db);
    if (synced) *synced = fs->synced_size(wal);
    if (!torn_write) fs->drop_unsynced();  // keep the torn write's bytes for the test to cut
    return wal;
  }

  /// The non-empty WAL file (*.log) of the database; fails the test if there is not exactly one.
  static std::string find_wal(const std::string& db) {
    std::vector<std::string> wals;
    for (auto& e : stdfs::directory_iterator(db)) {
      if (e.path().extension() == ".log" && stdfs::file_size(e.path()) > 0)
        wals.push_back(e.path().string());
      EXPECT_NE(e.path().extension(), ".sst")
          << "data reached an SST: the WAL is not the only copy";
    }
    EXPECT_EQ(wals.size(), 1u);
    return wals.empty() ? std::string{} : wals.front();
  }

  static void flip_byte(const std::string& path, std::uintmax_t offset) {
    std::fstream f{path, std::ios::in | std::ios::out | std::ios::binary};
    f.seekg(static_cast<std::streamoff>(offset));
    char ch = 0;
    f.get(ch);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(ch ^ 0x5a));
    ASSERT_TRUE(f.good()) << "cannot flip byte " << offset << " of " << path;
  }

  /// Opens `db` on the plain file system; returns the error, or every entry.
  result<std::map<std::string, std::string>> open_and_read(const std::string& db) {
    persistence_options plain;
    plain.dir = db;
    auto spawned = spawn_persistence(sys_, plain);
    if (!spawned.ok()) return spawned.err();
    std::map<std::string, std::string> out;
    {
      store_client c{sys_, spawned.value()};
      auto all = c.scan_all();
      if (!all.ok()) {
        stop(sys_, spawned.value());
        return all.err();
      }
      for (auto& e : all.value()) out[e.key] = e.value;
    }
    stop(sys_, spawned.value());
    return out;
  }

  static int acknowledged_present(const std::map<std::string, std::string>& got) {
    int n = 0;
    for (int i = 0; i < n_keys; ++i) {
      auto it = got.find(key(i));
      if (it != got.end() && it->second == value(i)) ++n;
    }
    return n;
  }

  temp_dir dir_;
  crash_config cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(Corruption, a_flipped_byte_in_the_middle_of_the_wal_refuses_to_start) {
  auto db = dir_.sub("db");
  auto wal = write_then_lose_power(db, false);
  ASSERT_FALSE(wal.empty());
  auto size = stdfs::file_size(wal);

  // Control: an unchanged copy opens with every key, all of them replayed from the WAL.
  auto control = dir_.sub("control");
  stdfs::copy(db, control);
  auto ok = open_and_read(control);
  ASSERT_TRUE(ok.ok()) << to_string(ok.err());
  ASSERT_EQ(acknowledged_present(ok.value()), n_keys);

  flip_byte(wal, size / 2);
  auto r = open_and_read(db);
  ASSERT_FALSE(r.ok()) << "opened a corrupt store with " << acknowledged_present(r.value())
                       << " of " << n_keys << " acknowledged keys";
  EXPECT_EQ(r.err().code, errc::corrupt_record) << to_string(r.err());
  EXPECT_EQ(r.err().message.rfind("refusing to start", 0), 0u) << r.err().message;
  std::printf("flipped byte %ju of %ju in the WAL: %s\n", size / 2, size,
              to_string(r.err()).c_str());
}

TEST_F(Corruption, every_flipped_wal_byte_refuses_to_start) {
  auto pristine = dir_.sub("pristine");
  auto wal = write_then_lose_power(pristine, false);
  ASSERT_FALSE(wal.empty());
  auto size = stdfs::file_size(wal);
  auto wal_name = stdfs::path{wal}.filename();
  // Every byte by default (3,740 of them, 3 to 15 s); LANEQ_CRASH_FLIP_POSITIONS=N flips N bytes
  // spread evenly instead, for a quick run.
  const std::uintmax_t positions = std::min<std::uintmax_t>(
      env_u64("LANEQ_CRASH_FLIP_POSITIONS", size), static_cast<std::uintmax_t>(size));
  int refused = 0, intact = 0, fewer = 0;
  for (std::uintmax_t p = 0; p < positions; ++p) {
    auto offset = p * size / positions;
    auto work = dir_.sub("work" + std::to_string(p));
    stdfs::copy(pristine, work);
    flip_byte((stdfs::path{work} / wal_name).string(), offset);
    auto r = open_and_read(work);
    if (!r.ok()) {
      EXPECT_EQ(r.err().code, errc::corrupt_record)
          << "byte " << offset << ": " << to_string(r.err());
      ++refused;
    } else if (acknowledged_present(r.value()) == n_keys) {
      ++intact;
    } else {
      ++fewer;
      ADD_FAILURE() << "byte " << offset << " of " << size << ": opened with "
                    << acknowledged_present(r.value()) << " of " << n_keys << " acknowledged keys";
    }
    stdfs::remove_all(work);
  }
  std::printf(
      "WAL of %ju bytes, %ju flipped positions%s: %d refused (corrupt_record), %d opened "
      "with every key, %d opened with fewer\n",
      size, positions, positions == size ? " (every byte)" : "", refused, intact, fewer);
  EXPECT_EQ(static_cast<std::uintmax_t>(refused), positions)
      << "every flipped byte is detected (guarantees.md G7): " << intact
      << " opened with every key";
}

TEST_F(Corruption, a_torn_unacknowledged_tail_opens_with_every_acknowledged_write) {
  // The last write's record reached the WAL, its sync failed, so it was never acknowledged;
  // then the power went and only part of the record made it to the disk.
  for (int cut = 0; cut < 3; ++cut) {
    auto db = dir_.sub("db" + std::to_string(cut));
    std::uint64_t synced = 0;
    auto wal = write_then_lose_power(db, true, &synced);
    ASSERT_FALSE(wal.empty());
    auto size = stdfs::file_size(wal);
    ASSERT_GT(size, synced) << "the unacknowledged record did not reach the WAL";
    auto tail = size - synced;
    std::uintmax_t keep = cut == 0 ? 1 : cut == 1 ? tail / 2 : tail - 3;  // torn at 3 places
    stdfs::resize_file(wal, synced + keep);
    auto r = open_and_read(db);
    ASSERT_TRUE(r.ok()) << "cut " << keep << " of " << tail << ": " << to_string(r.err());
    EXPECT_EQ(acknowledged_present(r.value()), n_keys) << "cut " << keep << " of " << tail;
    EXPECT_EQ(r.value().count("torn"), 0u) << "a torn record was replayed";
    EXPECT_EQ(r.value().size(), static_cast<std::size_t>(n_keys));
  }
}

}  // namespace
}  // namespace laneq::test
