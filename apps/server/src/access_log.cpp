// The HTTP access log (apps/server/include/laneq/server/access_log.hpp).
#include "laneq/server/access_log.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>

namespace laneq::server {

namespace {

void append_clean(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  if (text.empty()) text = "-";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u > ' ' && u < 0x7f) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 0xf];
    }
  }
}

}  // namespace

std::string format_access_line(const access_entry& e) {
  using namespace std::chrono;
  auto since = e.at.time_since_epoch();
  auto secs = duration_cast<seconds>(since);
  auto ms = duration_cast<milliseconds>(since - secs).count();
  std::time_t t = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char stamp[48];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string out{stamp};
  out += ' ';
  append_clean(out, e.method);
  out += ' ';
  append_clean(out, e.path.substr(0, e.path.find('?')));
  char nums[64];
  std::snprintf(nums, sizeof nums, " %u %.3f ", e.status, e.duration_ms);
  out += nums;
  append_clean(out, e.tenant);
  out += ' ';
  out += std::to_string(e.bytes);
  out += '\n';
  return out;
}

result<std::shared_ptr<access_log>> access_log::open(const std::string& where) {
  if (where == "stderr") return std::shared_ptr<access_log>(new access_log(stderr, false));
  std::FILE* f = std::fopen(where.c_str(), "a");
  if (f == nullptr)
    return error{errc::invalid_argument,
                 "access_log: cannot open '" + where + "': " + std::strerror(errno)};
  return std::shared_ptr<access_log>(new access_log(f, true));
}

access_log::~access_log() {
  if (owned_) std::fclose(out_);
}

void access_log::write(const access_entry& e) {
  auto line = format_access_line(e);
  std::lock_guard guard{mtx_};
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace laneq::server
