#!/usr/bin/env python3
"""slow_readers.py: laneqd's memory when receivers never read their answers (issue 22 §5).

    python3 tests/backlog/slow_readers.py --bin-dir DIR [--check] [options]

Starts a fresh laneqd from DIR on an OS-picked port (no CAF port) with `limits.answer_bytes`
from --answer-mib, fills one queue with --messages messages of --message-kib KiB, then opens
--receivers connections that each pipeline --requests receive requests (`max` --max,
`lease_ms` 1, so every lease runs out at once and the messages go round again) and never read
a byte. For --seconds it samples laneqd's resident memory (VmRSS) and prints one JSON object:
the RSS before the receivers and at its peak, the growth, the peak of laneqd's own count of
answer bytes being written (`laneq_http_answer_bytes`) and the answers refused over the bound
(`laneq_http_answers_refused_total`).

Without the bound (before issue 22), 20 such receivers of 1 MiB messages took laneqd from
264 MB to 2.78 GB. --check runs laneqd with jemalloc's decay off (MALLOC_CONF
dirty_decay_ms:0,muzzy_decay_ms:0), so RSS follows what laneqd holds rather than what the
allocator keeps for reuse (laneqd's own setting keeps freed pages 30 s, docs/decisions/
0006-jemalloc.md), and exits 1 unless the growth stays under what laneqd promises to hold for answers (api.md,
"Slow readers": the answers being written, at most the bound, plus one answer being prepared per
connection, at most --max messages) plus --slack-mib, the bound refused answers, and laneqd
stopped cleanly. The ctest test is slow_readers.memory_is_bounded; the
figures are in benchmarks/README.md, "Slow readers". Exit 2 on misuse.
"""
import argparse
import json
import os
import re
import socket
import sys
import tempfile
import time

from laneqd_process import Laneqd


class ObservedLaneqd(Laneqd):
    """A laneqd whose memory and metrics are read while receivers stall."""

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB$", f.read(), re.M).group(1)) * 1024

    def metric(self, name):
        m = re.search(r"^%s (\d+)$" % re.escape(name), self.call("GET", "/metrics"), re.M)
        return int(m.group(1)) if m else None


def receive_request(port, max_messages):
    body = json.dumps({"max": max_messages, "lease_ms": 1}).encode()
    return (b"POST /v1/queues/q/receive HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(body), body))


def run(args):
    with tempfile.TemporaryDirectory(prefix="slow-readers-") as tmp:
        env = dict(os.environ)
        if args.check:
            env["MALLOC_CONF"] = "dirty_decay_ms:0,muzzy_decay_ms:0"
        d = ObservedLaneqd(args.bin_dir, tmp, {"answer_bytes": args.answer_mib << 20}, env)
        try:
            d.call("PUT", "/v1/queues/q", {})
            body = "x" * (args.message_kib << 10)
            for _ in range(args.messages):
                d.call("POST", "/v1/queues/q/messages", {"messages": [{"body": body}]})
            before = d.rss_bytes()
            socks = []
            for _ in range(args.receivers):
                s = socket.create_connection(("127.0.0.1", d.port))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # read nothing
                s.sendall(receive_request(d.port, args.max) * args.requests)
                socks.append(s)
            peak, held = before, 0
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                peak = max(peak, d.rss_bytes())
                held = max(held, d.metric("laneq_http_answer_bytes") or 0)
                time.sleep(0.05)
            report = {"receivers": args.receivers, "message_kib": args.message_kib,
                      "messages": args.messages, "max": args.max,
                      "answer_bytes_limit": args.answer_mib << 20,
                      "rss_before_bytes": before, "rss_peak_bytes": peak,
                      "rss_growth_bytes": peak - before,
                      "answer_bytes_peak": held,
                      "answers_refused": d.metric("laneq_http_answers_refused_total")}
            for s in socks:
                s.close()
        finally:
            rc = d.stop()
        report["laneqd_exit"] = rc
        report["malloc_conf"] = env.get("MALLOC_CONF", "laneqd's built-in")
        return report


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--receivers", type=int, default=20)
    p.add_argument("--message-kib", type=int, default=1024)
    p.add_argument("--messages", type=int, default=64)
    p.add_argument("--max", type=int, default=10)
    p.add_argument("--requests", type=int, default=50, help="pipelined per connection")
    p.add_argument("--answer-mib", type=int, default=256, help="limits.answer_bytes in MiB")
    p.add_argument("--slack-mib", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    report = run(args)
    print(json.dumps(report))
    if not args.check:
        return 0
    problems = []
    per_answer = args.max * (args.message_kib << 10)
    bound = ((args.answer_mib + args.slack_mib) << 20) + args.receivers * per_answer
    if report["rss_growth_bytes"] >= bound:
        problems.append("RSS grew by %d bytes, bound %d" % (report["rss_growth_bytes"], bound))
    if not report["answers_refused"]:
        problems.append("no answer was refused: the receivers did not reach the bound")
    if report["laneqd_exit"] != 0:
        problems.append("laneqd exited %s after SIGTERM" % report["laneqd_exit"])
    for problem in problems:
        print("slow_readers: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
