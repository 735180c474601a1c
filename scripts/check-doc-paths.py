#!/usr/bin/env python3
"""check-doc-paths.py: every repository path a Markdown document cites exists.

    python3 scripts/check-doc-paths.py [--root ROOT] [FILE.md...]

Reads the given documents, or every tracked *.md file but the canaries in tests/docs/canary/
(git ls-files; every *.md under ROOT when ROOT is not a git checkout), and checks two kinds of citation:

- Markdown links `[text](target)` to a relative target: the file or directory must exist,
  resolved from the document's directory, and a `#anchor` must be a heading of the target (a
  GitHub heading slug).
- Paths in code spans and in prose (`libqueue/src/codec.cpp`, tests/crash/kill9/README.md,
  `laneq/spec_json.hpp`, `unit/key_test.cpp`, `router.cpp`): a token with a `/` whose first
  segment is a top-level entry of the repository, or that ends in a source or document
  extension, must name an existing path (globs such as `src/*.cpp` must match something). It may
  be written from the repository root, from the document's directory, from `tests/` (test files
  are cited as `unit/key_test.cpp`) or from an include directory (`laneq/codec.hpp`). A bare
  name of a source file or a document (`router.cpp`, `README.md`; .md .cpp .hpp .h .cmake .sh
  .py) must be the name of a file somewhere in the repository.

The project briefs that live outside this repository (EXTERNAL below; docs/README.md lists
them) may be cited by name.

Not checked: absolute paths (/proc/self/io, /var/lib/laneq), URLs, paths with placeholders
(<name>, DIR/...), names under build/ (build output), and text inside fenced code blocks, which
tests/docs/run_examples.py runs instead.

Exit 0 when every citation resolves; 1 with one line per broken citation (FILE:LINE: what);
2 on misuse. The ctest tests are lint.doc_paths_exist and its canary
lint.doc_paths_canary_is_caught (tests/docs/canary/paths.md).
"""
import glob
import os
import re
import subprocess
import sys

# Project briefs kept outside the repository (docs/README.md, "Project briefs"): cited by name.
EXTERNAL = {"ARCHITECTURE.md", "RELIABILITY.md", "STYLE.md", "seeds/ordering.md",
            "seeds/lanes-adr-0004.md"}
# Documents broken on purpose, checked only when named (the canaries).
CANARIES = "tests/docs/canary/"
EXTENSIONS = ("md", "cpp", "hpp", "h", "cmake", "sh", "py", "json", "txt", "dict")
INCLUDE_DIRS = ("libqueue/include", "actors/include", "apps/server/include", "apps/client/include")
EXT_RE = "|".join(EXTENSIONS)
BARE_RE = "md|cpp|hpp|h|cmake|sh|py"
# A path-like token: letters, digits and _ . - * / (a glob or a directory is fine).
TOKEN_RE = re.compile(r"(?<![\w./<>:@$-])(\.?[A-Za-z0-9_][A-Za-z0-9_.*/-]*)(?![\w/<>-])")
LINK_RE = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE_RE = re.compile(r"^\s*(```|~~~)")


def tracked_markdown(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.md"], check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f and not f.startswith(CANARIES)]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []  # not a git checkout
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return sorted(f for f in found if not f.startswith(CANARIES))


def all_basenames(root):
    names = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in (".git", "build")]
        names.update(files)
    return names


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path, cache):
    if path not in cache:
        seen = {}
        slugs = set()
        in_fence = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE_RE.match(line):
                    in_fence = not in_fence
                    continue
                m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    slugs.add(s if n == 0 else f"{s}-{n}")
        cache[path] = slugs
    return cache[path]


def exists(root, rel):
    full = os.path.join(root, rel)
    if any(ch in rel for ch in "*?["):
        return bool(glob.glob(full))
    return os.path.exists(full)


def resolves(root, doc_dir, token):
    bases = ["", doc_dir, "tests"] + list(INCLUDE_DIRS)
    return any(exists(root, os.path.normpath(os.path.join(b, token))) for b in bases)


def check_links(root, doc, lineno, line, cache, problems):
    for m in LINK_RE.finditer(line):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
            continue  # a URL (http:, mailto:) or an autolink
        path, _, anchor = target.partition("#")
        here = os.path.join(root, doc)
        dest = here if not path else os.path.normpath(os.path.join(os.path.dirname(here), path))
        if path and not os.path.exists(dest):
            problems.append(f"{doc}:{lineno}: link to {target}: {path} does not exist")
            continue
        if anchor and dest.endswith(".md") and os.path.isfile(dest):
            if anchor.lower() not in anchors_of(dest, cache):
                problems.append(f"{doc}:{lineno}: link to {target}: no heading #{anchor} in "
                                f"{os.path.relpath(dest, root)}")


def check_tokens(root, doc, lineno, line, top, basenames, problems):
    text = LINK_RE.sub(lambda m: m.group(0).split("](")[0], line)  # links are checked above
    text = re.sub(r"https?://\S+", " ", text)
    for m in TOKEN_RE.finditer(text):
        token = m.group(1).rstrip(".")
        if token in EXTERNAL or token.startswith(("build/", "./")) or (token.startswith(".") and "/" not in token):
            continue
        has_ext = re.search(rf"\.({EXT_RE})$", token) is not None
        if "/" not in token:
            # A bare name: only a source file or a document is taken for a citation (a name such
            # as laneqd.json is an example, not a file of the repository).
            if re.search(rf"\.({BARE_RE})$", token) and token not in basenames and "*" not in token:
                problems.append(f"{doc}:{lineno}: {token}: no file of that name in the repository")
            continue
        first = token.split("/", 1)[0]
        doc_dir = os.path.dirname(doc)
        local = os.path.isdir(os.path.join(root, doc_dir, first)) or \
            os.path.isdir(os.path.join(root, "tests", first))
        if not (first in top or local or has_ext):
            continue  # tenant/queue, acme/orders, text/plain: not a path
        if not resolves(root, doc_dir, token):
            problems.append(f"{doc}:{lineno}: {token}: no such path in the repository")


def check(root, docs):
    root = os.path.abspath(root)
    top = {e for e in os.listdir(root) if e not in (".git", "build")}
    basenames = all_basenames(root)
    cache = {}
    problems = []
    docs = docs or tracked_markdown(root)
    for doc in docs:
        in_fence = False
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if FENCE_RE.match(line):
                    in_fence = not in_fence
                    continue
                if in_fence:
                    continue
                check_links(root, doc, lineno, line, cache, problems)
                check_tokens(root, doc, lineno, line, top, basenames, problems)
    return docs, problems


def main(argv):
    args = argv[1:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if args[:1] == ["--root"]:
        if len(args) < 2:
            print(__doc__.splitlines()[2].strip(), file=sys.stderr)
            return 2
        root, args = args[1], args[2:]
    if any(a.startswith("-") or not os.path.isfile(os.path.join(root, a)) for a in args):
        print("check-doc-paths: give documents as paths relative to the root; usage:\n" +
              __doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    docs, problems = check(root, args)
    for p in problems:
        print(p)
    if problems:
        print(f"check-doc-paths: {len(problems)} broken citation(s) in {len(docs)} documents")
        return 1
    print(f"check-doc-paths: every cited path exists ({len(docs)} documents)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
