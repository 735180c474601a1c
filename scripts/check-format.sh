#!/usr/bin/env bash
# check-format.sh: clang-format check of every tracked and untracked (not ignored)
# C++ file under libqueue/ actors/ apps/ tests/ benchmarks/.
#
#   scripts/check-format.sh         check only (clang-format --dry-run --Werror); exit 1 on a diff
#   scripts/check-format.sh --fix   reformat the files in place
#
# The style is pinned to Debian 12's clang-format 14 (.clang-format at the repo root).
# A missing clang-format is an error, not a skip: scripts/install-deps.sh installs it.
# Override the binary with CLANG_FORMAT=/path/to/clang-format.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--fix]" >&2; exit 2 ;;
esac

want_major=14
cf="${CLANG_FORMAT:-}"
if [ -z "$cf" ]; then
  cf="$(command -v clang-format-${want_major} || command -v clang-format || true)"
fi
if [ -z "$cf" ] || ! [ -x "$(command -v "$cf")" ]; then
  echo "check-format: FAIL: clang-format not found (run scripts/install-deps.sh)" >&2
  exit 1
fi
version="$("$cf" --version)"
if ! [[ "$version" =~ version[[:space:]]+${want_major}\. ]]; then
  echo "check-format: FAIL: need clang-format ${want_major} (Debian 12), got: $version" >&2
  exit 1
fi

dirs=(libqueue actors apps tests benchmarks)
pats=()
for d in "${dirs[@]}"; do
  for e in hpp cpp h cc ipp; do pats+=("$d/*.$e"); done
done

files=()
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # tracked + untracked, minus .gitignore'd; skip tracked files deleted in the work tree
  while IFS= read -r -d '' f; do
    [ -f "$f" ] && files+=("$f")
  done < <(git -C "$root" ls-files -z --cached --others --exclude-standard -- "${pats[@]}" | sort -zu)
else
  existing=()
  for d in "${dirs[@]}"; do [ -d "$d" ] && existing+=("$d"); done
  if [ "${#existing[@]}" -gt 0 ]; then
    while IFS= read -r -d '' f; do files+=("$f"); done < <(
      find "${existing[@]}" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \
        -o -name '*.cc' -o -name '*.ipp' \) -print0 | sort -z)
  fi
fi

if [ "${#files[@]}" -eq 0 ]; then
  echo "check-format: OK (0 files)"
  exit 0
fi

if [ "$fix" -eq 1 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$cf" -i --style=file
  echo "check-format: reformatted ${#files[@]} files"
  exit 0
fi

if printf '%s\0' "${files[@]}" | xargs -0 "$cf" --dry-run --Werror --style=file; then
  echo "check-format: OK (${#files[@]} files)"
else
  echo "check-format: FAIL: run 'bash scripts/check-format.sh --fix'" >&2
  exit 1
fi
