"""laneqd_process.py: a laneqd started for one test script of tests/backlog/.

Laneqd(bin_dir, tmp, limits=None, env=None) writes TMP/laneqd.json (data in TMP/data, HTTP and
CAF on ports the OS picks, `limits` as given), starts DIR/laneqd on it with stdout and stderr in
TMP/laneqd.out and TMP/laneqd.err, and waits for its "laneqd ready" line. `port` and `url` are
its HTTP address, `proc` the process; `stop()` sends SIGTERM and returns the exit status.
"""
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

START_TIMEOUT_S = 60


class Laneqd:
    """A laneqd on ports the OS picked, with its own data directory and config."""

    def __init__(self, bin_dir, tmp, limits=None, env=None):
        config = os.path.join(tmp, "laneqd.json")
        with open(config, "w") as f:
            json.dump({"data_dir": os.path.join(tmp, "data"), "http": {"port": 0},
                       "caf": {"port": 0}, "limits": limits or {}}, f)
        self.out_path = os.path.join(tmp, "laneqd.out")
        with open(self.out_path, "wb") as out, open(os.path.join(tmp, "laneqd.err"), "wb") as err:
            self.proc = subprocess.Popen([os.path.join(bin_dir, "laneqd"), "--config", config],
                                         stdout=out, stderr=err, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        text = b""
        while b"laneqd ready\n" not in text:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("laneqd did not start: " + text.decode(errors="replace"))
            time.sleep(0.02)
            with open(self.out_path, "rb") as f:
                text = f.read()
        self.port = int(re.search(rb"^laneqd http_port=(\d+)$", text, re.M).group(1))
        self.url = "http://127.0.0.1:%d" % self.port

    def call(self, method, path, body=None):
        """One JSON request; the answer's body as text (an HTTP error raises)."""
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read().decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)
