#!/usr/bin/env python3
"""backlog_memory.py: laneqd's RSS with a deep backlog, through laneq_loadgen --mode=backlog.

    python3 tests/backlog/backlog_memory.py --bin-dir DIR (unordered|ordered)

Starts a fresh laneqd from DIR (laneqd_process.py: own data directory, OS-picked ports), fills one
queue with waiting messages (nothing consumes them) by `laneq_loadgen --mode=backlog`, and checks
the report (issue 22 §6; the figures: benchmarks/README.md, "Backlog memory"):

- unordered: two fills of 20,000 messages of 1 KiB. Each report names laneqd's pid and its RSS
  before and after, and the queue's stats count the whole backlog while the messages it holds in
  memory (`window_bytes`) stay within one class's window (`group_window_max`, 1,024 messages by
  default: at most 2 MiB), not the 20 or 40 MiB of the backlog (docs/design/persistence.md P12).
- ordered: one fill of 5,000 messages in 100 groups reports the same figures.

Behaviour only: no timing and no fixed RSS number. Exit 0 when every check holds, 1 otherwise
(each failed check is printed), 2 on misuse. The ctest tests are backlog_memory.unordered and
backlog_memory.ordered.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from laneqd_process import Laneqd


def fill(bin_dir, d, messages, groups, queue=None):
    """Runs the backlog mode against `d` (into `queue`, else a queue of its own); its report."""
    named = ["--queue=" + queue] if queue else []
    args = [os.path.join(bin_dir, "laneq_loadgen"), "--mode=backlog", "--url=" + d.url,
            "--server-pid=%d" % d.proc.pid, "--messages=%d" % messages, "--size=1024",
            "--groups=%d" % groups, "--batch=200", "--keep", "--no-progress"]
    r = subprocess.run(args + named, capture_output=True, text=True, timeout=600)
    print(r.stdout.strip())
    if r.returncode != 0:
        raise RuntimeError("laneq_loadgen exited %d: %s%s" % (r.returncode, r.stdout, r.stderr))
    return json.loads(r.stdout)


class Checks:
    def __init__(self):
        self.failed = 0

    def expect(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        self.failed += 0 if ok else 1


def check_report(c, report, d, messages, groups):
    c.expect(report.get("ok") is True, "the report says ok")
    c.expect(report.get("mode") == "backlog", "the report is a backlog report")
    c.expect(report.get("enqueued") == messages, "%d messages enqueued" % messages)
    c.expect(report.get("groups") == groups, "%d groups" % groups)
    s = report.get("server", {})
    c.expect(s.get("pid") == d.proc.pid, "the report names laneqd's pid")
    c.expect(s.get("rss_mb_before", 0) > 0, "laneqd's RSS before the fill is reported")
    c.expect(s.get("rss_mb_after", 0) > 0, "laneqd's RSS after the fill is reported")
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", required=True)
    p.add_argument("kind", choices=["unordered", "ordered"])
    a = p.parse_args()
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="laneq-backlog-") as tmp:
        d = Laneqd(a.bin_dir, tmp)
        try:
            if a.kind == "unordered":
                for n in (20000, 40000):
                    report = fill(a.bin_dir, d, 20000, 0, queue="backlog-unordered")
                    check_report(c, report, d, 20000, 0)
                    s = json.loads(d.call("GET", "/v1/queues/" + report["queue"]))["stats"]
                    c.expect(s.get("backlog") == n, "the stats count a backlog of %d" % n)
                    c.expect(0 < s.get("window_bytes", 0) <= 2 << 20,
                             "%d messages of 1 KiB waiting hold at most 2 MiB in memory (%d bytes)"
                             % (n, s.get("window_bytes", 0)))
            else:
                check_report(c, fill(a.bin_dir, d, 5000, 100), d, 5000, 100)
        finally:
            rc = d.stop()
        c.expect(rc == 0, "laneqd exits 0 on SIGTERM")
    print("backlog_memory.%s: %s" % (a.kind, "FAILED (%d)" % c.failed if c.failed else "passed"))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
