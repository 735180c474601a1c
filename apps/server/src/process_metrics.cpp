// The process's own figures for /metrics (docs/operations.md "Metrics"): CPU time, memory, file
// descriptors and start time under the names Prometheus clients use (process_*), read from /proc
// when scraped, and laneq_build_info.
#include "laneq/server/metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "laneq/version.hpp"

namespace laneq::server {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void gauge(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + num(v) + "\n";
}

/// The fields of /proc/self/stat after the command name (which may hold spaces and parentheses):
/// fields[0] is the state (field 3 of proc(5)), so field n of proc(5) is fields[n - 3].
std::vector<std::string> stat_fields() {
  std::ifstream in{"/proc/self/stat"};
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest{line.substr(close + 1)};
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

/// The system's boot time in seconds since the epoch (`btime` of /proc/stat), 0 if unknown.
double boot_time_s() {
  std::ifstream in{"/proc/stat"};
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double v = 0;
      in >> v;
      return v;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

/// Open descriptors: the entries of /proc/self/fd (the one listing it included, as Prometheus
/// clients count it).
std::size_t open_fds() {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it{"/proc/self/fd", ec}, end; !ec && it != end;
       it.increment(ec))
    ++n;
  return n;
}

}  // namespace

void render_process(std::string& out) {
  auto fields = stat_fields();
  // proc(5): utime 14, stime 15 (clock ticks), starttime 22 (ticks after boot), vsize 23 (bytes),
  // rss 24 (pages).
  auto field = [&fields](std::size_t n) {
    return n - 3 < fields.size() ? std::strtod(fields[n - 3].c_str(), nullptr) : 0.0;
  };
  auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  gauge(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
        (field(14) + field(15)) / ticks);
  gauge(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
        field(24) * page);
  gauge(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23));
  gauge(out, "process_start_time_seconds", "gauge",
        "Start time of the process since the Unix epoch, in seconds.",
        boot_time_s() + field(22) / ticks);
  gauge(out, "process_open_fds", "gauge", "Open file descriptors.",
        static_cast<double>(open_fds()));
  rlimit lim{};
  double max_fds = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? static_cast<double>(lim.rlim_cur) : 0;
  gauge(out, "process_max_fds", "gauge", "The limit on open file descriptors (soft RLIMIT_NOFILE).",
        max_fds);
  out +=
      "# HELP laneq_build_info The laneqd build: its version (label), always 1.\n"
      "# TYPE laneq_build_info gauge\n";
  out += std::string{"laneq_build_info{version=\""} + version_string + "\"} 1\n";
}

}  // namespace laneq::server
