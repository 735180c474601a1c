// Fuzz target: HTTP request handling (apps/server/router.hpp) over an in-memory broker,
// RELIABILITY.md G8/T6. The input is "METHOD TARGET\n" then the body. Every request is answered
// exactly once; an error answer is a numbered JSON error; a request answered with an error
// changes nothing (the queues and their counters read the same before and after).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <string_view>

#include <boost/json/parse.hpp>

#include "laneq/actors/broker.hpp"
#include "laneq/server/router.hpp"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_http_request: property violated: %s\n", what);
  std::abort();
}

struct fixture {
  fixture() : cfg(make_cfg()), sys(cfg), brk(sys), admin(sys, brk.admin()) {
    rt = std::make_unique<laneq::server::router>(sys, brk.admin(), brk.store(),
                                                 laneq::server::http_limits{},
                                                 std::vector<laneq::server::token_config>{});
    // Something to act on: an ordered queue with a message in it.
    auto q =
        admin.create_queue(laneq::queue_spec("orders").ordered_by({laneq::key::header("account")}));
    require(q.ok(), "creating the seed queue");
    laneq::blocking_queue bq{sys, q.value()};
    require(bq.enqueue(laneq::outgoing_message{"m1", {{"account", "A"}}, "", {}}).ok(),
            "seeding a message");
  }

  static caf::actor_system_config& make_cfg() {
    static caf::actor_system_config c;
    laneq::add_message_types(c);
    return c;
  }

  /// The queues and their counters: what a rejected request must leave unchanged. `expired`
  /// counts the leases that ran out: a lease taken by an earlier input with a short `lease_ms`
  /// may expire at any moment (its timer moves the message back or dead-letters it), which is
  /// not the current request's doing.
  std::string state(std::uint64_t* expired = nullptr) {
    std::string out;
    auto names = admin.list_queues();
    require(names.ok(), "listing queues");
    if (expired != nullptr) *expired = 0;
    for (const auto& n : names.value()) {
      auto d = admin.describe(n);
      if (!d.ok()) continue;
      const auto& s = d.value().stats;
      if (expired != nullptr) *expired += s.lease_expired;
      out += n + ":" + d.value().summary + ":" + std::to_string(s.enqueued) + "," +
             std::to_string(s.acked) + "," + std::to_string(s.nacked) + "," +
             std::to_string(s.dead_lettered) + "," + std::to_string(s.redriven) + "," +
             std::to_string(s.backlog) + "," + std::to_string(s.in_flight) + "," +
             std::to_string(s.dead_letters) + ";";
    }
    return out;
  }

  caf::actor_system_config& cfg;
  caf::actor_system sys;
  laneq::broker brk;
  laneq::blocking_admin admin;
  std::unique_ptr<laneq::server::router> rt;
};

fixture* the_fixture = nullptr;

}  // namespace

// The actor system must stop before CAF's own statics go away at exit: the replay driver calls
// this before returning (libFuzzer never does; it leaves through _Exit or a crash).
extern "C" void laneq_fuzz_teardown() {
  delete the_fixture;
  the_fixture = nullptr;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (the_fixture == nullptr) the_fixture = new fixture;
  auto& f = *the_fixture;
  std::string_view text{reinterpret_cast<const char*>(data), size};
  // A long poll waits up to 20 s by design; the fuzzer would spend its time waiting.
  if (text.find("wait_ms") != std::string_view::npos) return 0;
  laneq::server::http_request req;
  auto eol = text.find('\n');
  auto line = text.substr(0, eol);
  auto sp = line.find(' ');
  req.method = std::string{line.substr(0, sp)};
  if (sp != std::string_view::npos) req.target = std::string{line.substr(sp + 1)};
  if (eol != std::string_view::npos) req.body = std::string{text.substr(eol + 1)};

  std::uint64_t expired_before = 0;
  auto before = f.state(&expired_before);
  auto answered = std::make_shared<std::promise<laneq::server::http_response>>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  f.rt->handle(req, [answered, calls](laneq::server::http_response r) {
    require(calls->fetch_add(1) == 0, "a request answered twice");
    answered->set_value(std::move(r));
  });
  auto fut = answered->get_future();
  require(fut.wait_for(std::chrono::seconds(30)) == std::future_status::ready,
          "a request never answered");
  auto resp = fut.get();
  resp.body = resp.take_body();
  require(resp.status >= 200 && resp.status < 600, "a status outside 2xx-5xx");
  if (resp.status >= 400) {
    boost::json::error_code ec;
    auto doc = boost::json::parse(resp.body, ec);
    require(!ec && doc.is_object(), "an error answer that is not a JSON object");
    const auto* e = doc.as_object().if_contains("error");
    require(e != nullptr && e->is_object(), "an error answer without an error object");
    const auto& eo = e->as_object();
    require(eo.contains("code") && eo.at("code").is_string(), "an error without a code");
    require(eo.contains("number") && eo.at("number").is_int64() && eo.at("number").as_int64() > 0,
            "an error without a number");
    require(eo.contains("message") && eo.at("message").is_string() &&
                !eo.at("message").as_string().empty(),
            "an error without a message");
    std::uint64_t expired_after = 0;
    auto after = f.state(&expired_after);
    // A lease timer that fired meanwhile explains a difference (found by fuzzing: an earlier
    // input's 1 ms lease expired between the two snapshots); anything else is the request's.
    require(after == before || expired_after != expired_before,
            "a request answered with an error changed the broker");
  }
  return 0;
}
