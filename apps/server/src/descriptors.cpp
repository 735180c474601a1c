// laneqd's file descriptor budget (apps/server/include/laneq/server/descriptors.hpp).
#include "laneq/server/descriptors.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace laneq::server {

namespace {

constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

std::size_t from_rlim(rlim_t v) {
  if (v == RLIM_INFINITY || v > std::numeric_limits<std::size_t>::max()) return unlimited;
  return static_cast<std::size_t>(v);
}

/// The most descriptors a process may have on Linux (fs.nr_open), for an unlimited hard limit.
rlim_t nr_open() {
  std::ifstream in{"/proc/sys/fs/nr_open"};
  rlim_t n = 0;
  if (in >> n && n > 0) return n;
  return rlim_t{1} << 20;  // the kernel's default
}

std::string count(std::size_t n) {
  return n == unlimited ? std::string{"unlimited"} : std::to_string(n);
}

/// The table files the store gets out of `avail` descriptors when `configured` connections
/// are asked for (descriptor_bounds::store_files_min).
std::size_t store_files_for(std::size_t avail, std::size_t configured) {
  std::size_t floor = std::max(descriptor_bounds::store_files_min, avail / 4);
  std::size_t leftover = avail > configured ? avail - configured : 0;
  return std::min(std::max(leftover, floor), descriptor_bounds::store_files_max);
}

/// The least `avail` at which `configured` connections fit next to the store's table files:
/// `avail - max(store_files_min, avail / 4) >= configured`.
std::size_t avail_for(std::size_t configured) {
  return std::max(configured + descriptor_bounds::store_files_min, 4 * (configured - 1) / 3 + 1);
}

}  // namespace

descriptor_limit raise_descriptor_limit() {
  descriptor_limit out;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    out.soft = out.hard = out.original = 1024;
    out.raise_failed = std::string{"getrlimit: "} + std::strerror(errno);
    return out;
  }
  out.original = out.soft = from_rlim(rl.rlim_cur);
  out.hard = from_rlim(rl.rlim_max);
  rlim_t target = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= target) return out;
  rlimit raised{target, rl.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    out.raise_failed = "setrlimit to " + std::to_string(target) + ": " + std::strerror(errno);
    return out;
  }
  out.soft = from_rlim(target);
  return out;
}

std::size_t open_descriptors() {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it{"/proc/self/fd", ec}, end; !ec && it != end;
       it.increment(ec))
    ++n;
  // The iterator's own descriptor is among them.
  return std::max<std::size_t>(n > 0 ? n - 1 : 0, 3);
}

result<descriptor_plan> plan_descriptors(std::size_t limit, std::size_t open_now, bool caf,
                                         const http_limits& configured) {
  descriptor_plan p;
  p.limit = limit;
  p.configured = configured.connections;
  p.own = open_now + descriptor_bounds::runtime + (caf ? descriptor_bounds::caf_clients : 0);
  p.needed_for_configured = p.own + avail_for(configured.connections);
  std::size_t avail = limit > p.own ? limit - p.own : 0;
  p.store_files = store_files_for(avail, configured.connections);
  std::size_t left = avail > p.store_files ? avail - p.store_files : 0;
  p.connections = std::min(configured.connections, left);
  if (p.connections < http_bounds::connections_min) {
    auto least = p.own + descriptor_bounds::store_files_min + http_bounds::connections_min;
    return error{errc::invalid_argument,
                 "the file descriptor limit (RLIMIT_NOFILE, ulimit -n) is " + count(limit) +
                     ": laneqd needs " + std::to_string(p.own) + " for itself, " +
                     std::to_string(descriptor_bounds::store_files_min) +
                     " for its store's files and " + std::to_string(http_bounds::connections_min) +
                     " for HTTP connections at least; raise it to at least " +
                     std::to_string(least) + " (" + std::to_string(p.needed_for_configured) +
                     " for limits.connections " + std::to_string(p.configured) + ")"};
  }
  p.connections_reserve = configured.connections_reserve;
  if (p.connections < configured.connections)
    p.connections_reserve = std::min(p.connections_reserve, p.connections / 4);
  return p;
}

std::string describe(const descriptor_plan& p, const descriptor_limit& l) {
  std::string out = "connection cap " + std::to_string(p.connections) + " (configured " +
                    std::to_string(p.configured) + ", descriptor limit " + count(p.limit) +
                    "), reserve " + std::to_string(p.connections_reserve) + "; " +
                    std::to_string(p.store_files) + " descriptors for the store's table files, " +
                    std::to_string(p.own) + " for laneqd itself";
  if (l.soft != l.original)
    out += "; descriptor limit raised from " + count(l.original) + " to the hard limit";
  if (!l.raise_failed.empty())
    out += "; the limit could not be raised to the hard limit " + count(l.hard) + " (" +
           l.raise_failed + ")";
  if (p.connections < p.configured)
    out += "; the configured cap needs a descriptor limit of " +
           std::to_string(p.needed_for_configured);
  return out;
}

}  // namespace laneq::server
