// Starting and killing laneq_kill9_broker processes (broker_process.hpp).
#include "broker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

extern char** environ;

namespace laneq::kill9 {

broker_process::~broker_process() {
  kill9();
}

void broker_process::close_pipes() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdin_fd_ = stdout_fd_ = -1;
}

std::string broker_process::start(const std::string& binary, const std::string& data_dir,
                                  std::int64_t grace_ms, std::chrono::milliseconds timeout) {
  kill9();
  int in[2];
  int out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return std::string{"pipe2: "} + std::strerror(errno);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return std::string{"pipe2: "} + std::strerror(errno);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);    // dup2 clears O_CLOEXEC
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);  // stderr is inherited
  auto grace = std::to_string(grace_ms);
  std::vector<std::string> args{binary, "--data", data_dir, "--port", "0", "--grace-ms", grace};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  if (rc != 0) {
    close_pipes();
    return "posix_spawn " + binary + ": " + std::strerror(rc);
  }
  pid_ = pid;

  // Read up to the first newline: "ready <ports>".
  std::string line;
  auto until = std::chrono::steady_clock::now() + timeout;
  while (line.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill9();
      return "no ready line within " + std::to_string(timeout.count()) + " ms (got '" + line + "')";
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[256];
    auto got = ::read(stdout_fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      kill9();
      return "the broker exited before it was ready (got '" + line + "')";
    }
    line.append(buf, static_cast<std::size_t>(got));
  }
  line.erase(line.find('\n'));
  auto ports = parse_ready_line(line);
  if (!ports) {
    kill9();
    return "malformed ready line '" + line + "'";
  }
  ports_ = *ports;
  return {};
}

void broker_process::kill9() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  close_pipes();
}

}  // namespace laneq::kill9
