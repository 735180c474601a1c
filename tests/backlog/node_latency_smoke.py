#!/usr/bin/env python3
"""node_latency_smoke.py: the Node.js latency client runs against laneqd and reports.

    python3 tests/backlog/node_latency_smoke.py --bin-dir DIR [--node PATH]

Starts a fresh laneqd from DIR (laneqd_process.py), runs benchmarks/loadgen/node/latency.mjs
against it briefly (200 msg/s for 1 s) in two shapes, ordered by 20 groups with synchronous acks
and unordered with asynchronous acks, and checks that each run exits 0 and reports what
benchmarks/README.md ("Node.js client") describes: every message delivered and acked once, in
order, and the latency figures and their breakdown present. Behaviour only: no figure is
compared with a bound. Exit 0 when every check holds, 1 otherwise, 77 (skipped) when node is not
installed. The ctest test is bench.node_latency_client_runs.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from laneqd_process import Laneqd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "loadgen", "node", "latency.mjs")
SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--node", default="")
    a = ap.parse_args()
    node = a.node or shutil.which("node")
    if not node or not os.path.exists(node):
        print("node is not installed: skipped")
        return SKIP
    failed = 0

    def expect(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += 0 if ok else 1

    with tempfile.TemporaryDirectory(prefix="laneq-node-smoke.") as tmp:
        d = Laneqd(a.bin_dir, tmp)
        try:
            for name, extra, groups in (("ordered", ["--groups=20"], 20),
                                        ("unordered", ["--groups=0", "--ack=async",
                                                       "--linger-ms=20"], 0)):
                r = subprocess.run(
                    [node, SCRIPT, "--url=" + d.url, "--rate=200", "--seconds=1", "--warmup-s=0",
                     "--server-pid=%d" % d.proc.pid] + extra,
                    capture_output=True, text=True, timeout=120)
                print(r.stdout.strip())
                if r.stderr.strip():
                    print(r.stderr.strip())
                expect(r.returncode == 0, "%s: latency.mjs exits 0 (got %d)" % (name, r.returncode))
                try:
                    rep = json.loads(r.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    expect(False, "%s: the output is one JSON object" % name)
                    continue
                expect(rep.get("ok") is True, "%s: the report says ok" % name)
                expect(rep.get("messages") == 200, "%s: 200 messages" % name)
                expect(rep.get("delivered") == 200 and rep.get("acked") == 200,
                       "%s: every message delivered and acked" % name)
                expect(rep.get("duplicates") == 0 and rep.get("order_violations") == 0,
                       "%s: no duplicate, nothing out of order" % name)
                expect(rep.get("groups") == groups, "%s: %d groups" % (name, groups))
                e2d = rep.get("enqueue_to_delivery", {})
                expect(e2d.get("count") == 200 and all(
                    isinstance(e2d.get(k), (int, float)) for k in
                    ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")),
                    "%s: enqueue_to_delivery has its count and quantiles" % name)
                b = rep.get("breakdown", {})
                expect(all(k in b for k in ("producer_wait", "enqueue_call", "enqueue_socket_wait",
                                            "answer_to_delivery", "by_receive", "slowest_1pct")),
                       "%s: the breakdown is reported" % name)
                expect("how" in rep.get("producer", {}) and "how" in rep.get("consumer", {}),
                       "%s: the report says how the producer batches and the consumers poll" % name)
                h = rep.get("laneqd", {}).get("enqueue_to_delivery") or {}
                expect(h.get("count") == 200,
                       "%s: laneqd's own enqueue-to-delivery histogram counts the 200" % name)
                expect((rep.get("server") or {}).get("pid") == d.proc.pid,
                       "%s: laneqd's CPU is read" % name)
        finally:
            code = d.stop()
            expect(code == 0, "laneqd stops cleanly (exit %s)" % code)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
