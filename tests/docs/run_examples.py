#!/usr/bin/env python3
"""run_examples.py: runs the shell examples of Markdown documents against a fresh laneqd.

    python3 tests/docs/run_examples.py --bin-dir DIR [--root ROOT] [--discard-failed] [--verbose]
                                       FILE.md|GLOB...

The convention (docs/README.md, "Examples that run"):

- Every fenced block tagged ```sh or ```bash is an example, and runs. Blocks in other languages
  (cpp, json) are not run.
- A block whose first line is `# not run by tests/docs: REASON` is not run; the reason must not
  be empty, and the runner prints it. Anything else in an sh block runs.
- The blocks of one document run in document order, as one bash script with `set -eo pipefail`
  (so a variable a block sets, such as a lease, is there for the next block), against one fresh
  laneqd started for that document: `laneqd --data-dir TMP/data --http-port 0 --caf-port 0`
  from DIR, on a port the OS picked. The script runs in TMP/work with HOME=TMP/home (so `~/...`
  paths stay in the test's directory), DIR first on PATH (`laneq`, `laneqd`), LANEQ_URL set to
  the laneqd and LANEQ_TOKEN unset. The address `localhost:7070` or `127.0.0.1:7070` in a block
  is replaced by the fresh laneqd's address before it runs.
- `curl` is a shell function that adds `--fail-with-body`: an HTTP error status fails the
  example, as a failing command does.
- A document fails when any command of it fails (the runner prints the document, the block's
  first line, the failing line, its status and the output so far), or when its laneqd does not
  exit 0 on SIGTERM afterwards. A document without sh blocks starts no laneqd.

Exit 0 when every document passes, 1 otherwise (the last line says which), 2 on misuse. The
ctest tests are docs.examples_run and the canaries docs.*_canary_is_caught
(tests/docs/canary/).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

RUN_LANGS = ("sh", "bash")
SKIP_RE = re.compile(r"^#\s*not run by tests/docs:(.*)$")
FENCE_RE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
ADDRESS_RE = re.compile(r"\b(localhost|127\.0\.0\.1):7070\b")
START_TIMEOUT_S = 60   # a hang guard, not a performance bound
SCRIPT_TIMEOUT_S = 240
STOP_TIMEOUT_S = 30

PRELUDE = """set -eEo pipefail
curl() { command curl --fail-with-body "$@"; }
__doc_block() { echo "$1" >"$__DOC_STATE"; }
trap 'echo "$? $LINENO ${BASH_LINENO[0]}" >>"$__DOC_STATE.err"' ERR
"""


class Block:
    def __init__(self, line, lang, text):
        self.line = line  # the line of the opening fence
        self.lang = lang
        self.text = text
        first = text.splitlines()[0] if text.strip() else ""
        m = SKIP_RE.match(first.strip())
        self.skip_reason = m.group(1).strip() if m else None
        self.skipped = m is not None


def blocks_of(path):
    out = []
    fence = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines, 1):
        m = FENCE_RE.match(line)
        if fence is None:
            if m:
                fence = (m.group(2), m.group(3).lower(), i, [])
        elif m and m.group(2).startswith(fence[0][0]) and len(m.group(2)) >= len(fence[0]) \
                and not m.group(3):
            marker, lang, start, body = fence
            if lang in RUN_LANGS:
                out.append(Block(start, lang, "\n".join(body) + "\n"))
            fence = None
        else:
            fence[3].append(line)
    if fence is not None:
        raise ValueError(f"{path}:{fence[2]}: a fenced block is never closed")
    return out


class Laneqd:
    """laneqd on a fresh data directory and a free port; its output goes to files, never a pipe
    that could fill."""

    def __init__(self, bin_dir, tmp):
        self.out_path = os.path.join(tmp, "laneqd.out")
        self.log_path = os.path.join(tmp, "laneqd.log")
        with open(self.out_path, "wb") as out, open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [os.path.join(bin_dir, "laneqd"), "--data-dir", os.path.join(tmp, "data"),
                 "--http-port", "0", "--caf-port", "0"],
                stdout=out, stderr=log, stdin=subprocess.DEVNULL)
        self.port = None

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with open(self.out_path, "rb") as f:
                out = f.read()
            if b"laneqd ready\n" in out:
                break
            if self.proc.poll() is not None:
                return "laneqd exited at start (status %s)" % self.proc.returncode
            if time.monotonic() > deadline:
                return "laneqd did not print 'laneqd ready' within %d s" % START_TIMEOUT_S
            time.sleep(0.02)
        m = re.search(rb"^laneqd http_port=(\d+)$", out, re.M)
        if not m:
            return "laneqd printed no http_port line"
        self.port = int(m.group(1))
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "killed after %d s without exiting on SIGTERM" % STOP_TIMEOUT_S
        with open(self.log_path, "rb") as f:
            return rc, f.read().decode(errors="replace")


def build_script(blocks, address):
    parts = [PRELUDE]
    mapping = {}  # script line -> (block index, line in the document)
    line_no = PRELUDE.count("\n")
    for n, b in enumerate(blocks):
        if b.skipped:
            continue
        header = f"__doc_block {n}\n"
        parts.append(header)
        line_no += 1
        for k, text in enumerate(b.text.splitlines()):
            doc_line = b.line + 1 + k
            parts.append(ADDRESS_RE.sub(address, text) + "\n")
            line_no += 1
            mapping[line_no] = (n, doc_line)
    return "".join(parts), mapping


def run_document(doc, root, bin_dir, keep_failed=True, verbose=False):
    """Returns (ok, report lines)."""
    path = os.path.join(root, doc)
    try:
        blocks = blocks_of(path)
    except ValueError as e:
        return False, [f"DOC EXAMPLE FAILED: {e}"]
    report = []
    for b in blocks:
        if b.skipped and not b.skip_reason:
            return False, [f"DOC EXAMPLE FAILED: {doc}:{b.line + 1}: a block marked "
                           "'# not run by tests/docs:' must give its reason"]
        if b.skipped:
            report.append(f"  skipped {doc}:{b.line}: {b.skip_reason}")
    runnable = [b for b in blocks if not b.skipped]
    if not runnable:
        report.append(f"{doc}: no sh block" if not blocks else
                      f"{doc}: no example to run ({len(blocks)} sh block(s), all skipped)")
        return True, report

    tmp = tempfile.mkdtemp(prefix="laneq-doc-examples-")
    ok = False
    try:
        for sub in ("work", "home"):
            os.mkdir(os.path.join(tmp, sub))
        started = time.monotonic()
        daemon = Laneqd(bin_dir, tmp)
        problem = daemon.wait_ready()
        if problem:
            rc, log = daemon.stop()
            report += [f"DOC EXAMPLE FAILED: {doc}: {problem} (exit {rc})", log]
            return False, report
        address = f"127.0.0.1:{daemon.port}"
        script, mapping = build_script(blocks, address)
        script_path = os.path.join(tmp, "examples.sh")
        with open(script_path, "w") as f:
            f.write(script)
        state = os.path.join(tmp, "state")
        env = dict(os.environ)
        env.pop("LANEQ_TOKEN", None)
        env.update({
            "PATH": os.path.abspath(bin_dir) + os.pathsep + env.get("PATH", ""),
            "HOME": os.path.join(tmp, "home"),
            "LANEQ_URL": f"http://{address}",
            "__DOC_STATE": state,
        })
        try:
            res = subprocess.run(["bash", script_path], cwd=os.path.join(tmp, "work"), env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, timeout=SCRIPT_TIMEOUT_S)
            rc, output = res.returncode, res.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc = f"timeout after {SCRIPT_TIMEOUT_S} s"
            output = (e.stdout or b"").decode(errors="replace")
        stop_rc, log = daemon.stop()
        took = time.monotonic() - started
        if rc != 0:
            where = failure_site(state, mapping, blocks)
            report += [f"DOC EXAMPLE FAILED: {doc}{where} (exit {rc})",
                       "----- output of the document's examples -----", output.rstrip(),
                       "----- laneqd's stderr -----", log.rstrip(), "-----"]
            return False, report
        if stop_rc != 0:
            report += [f"DOC EXAMPLE FAILED: {doc}: laneqd exited {stop_rc} on SIGTERM after "
                       "the examples", log.rstrip()]
            return False, report
        report.append(f"{doc}: {len(runnable)} example block(s) passed in {took:.1f} s")
        if verbose:
            report += ["----- output -----", output.rstrip(), "-----"]
        ok = True
        return True, report
    finally:
        if ok or not keep_failed:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            report.append(f"  (kept {tmp})")


def failure_site(state, mapping, blocks):
    try:
        with open(state + ".err") as f:
            first = f.read().split("\n")[0].split()  # status, LINENO, the caller's line
        lines = [int(x) for x in first[1:3]]
    except (OSError, ValueError):
        lines = []
    for script_line in lines:
        if script_line in mapping:
            n, doc_line = mapping[script_line]
            return f":{doc_line} (the block at line {blocks[n].line})"
    try:
        with open(state) as f:
            n = int(f.read().strip())
        return f": in the block at line {blocks[n].line}"
    except (OSError, ValueError, IndexError):
        return ""


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", required=True, help="directory of laneqd and laneq")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--discard-failed", action="store_true",
                    help="remove a failed document's directory too (the canaries)")
    ap.add_argument("--verbose", action="store_true", help="print what passing examples printed")
    ap.add_argument("docs", nargs="+")
    a = ap.parse_args(argv[1:])
    for tool in ("laneqd", "laneq"):
        if not os.access(os.path.join(a.bin_dir, tool), os.X_OK):
            print(f"run_examples: {tool} is not in {a.bin_dir}", file=sys.stderr)
            return 2
    docs = []
    for pattern in a.docs:  # patterns are expanded here, so a new document is run at once
        found = sorted(os.path.relpath(p, a.root)
                       for p in glob.glob(os.path.join(a.root, pattern)))
        if not found:
            print(f"run_examples: no document matches {pattern}", file=sys.stderr)
            return 2
        docs += [d for d in found if d not in docs]
    failed = []
    for doc in docs:
        ok, report = run_document(doc, a.root, a.bin_dir, keep_failed=not a.discard_failed,
                                  verbose=a.verbose)
        print("\n".join(report), flush=True)
        if not ok:
            failed.append(doc)
    if failed:
        print(f"run_examples: FAILED: {', '.join(failed)}")
        return 1
    print(f"run_examples: every example of {len(docs)} document(s) ran")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
