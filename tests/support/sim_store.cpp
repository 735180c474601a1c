// The simulation's store: RocksDB on an in-memory file system (tests/support/sim_store.hpp).
#include "sim_store.hpp"

namespace laneq::test {

namespace {

/// The store's directory in the in-memory file system (no real directory of that name is used).
constexpr const char* sim_dir = "/laneq-sim/db";

/// RocksDB's information log, dropped: no line is even formatted (its level is above every
/// level RocksDB logs at).
class null_logger final : public rocksdb::Logger {
 public:
  null_logger() : rocksdb::Logger(rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS) {}
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

}  // namespace

sim_store::sim_store()
    : mem_(rocksdb::NewMemEnv(rocksdb::Env::Default())),
      fs_(std::make_shared<fault_fs>(mem_->GetFileSystem())),
      env_(make_env(fs_)) {}

sim_store::~sim_store() = default;

result<store_actor> sim_store::open(caf::actor_system& sys, persistence_options opts) {
  opts.dir = sim_dir;
  opts.env = env_;
  opts.own_thread = false;
  opts.info_log = std::make_shared<null_logger>();
  // A disk that never fills: the enqueue admission check always passes.
  opts.measure_disk = [](const std::string&) {
    return std::optional<disk_space>{disk_space{std::uint64_t{1} << 40, std::uint64_t{1} << 41}};
  };
  return spawn_persistence(sys, std::move(opts));
}

}  // namespace laneq::test
