#!/usr/bin/env bash
# check-layering.sh: enforces the dependency direction apps -> actors -> libqueue.
#
#   scripts/check-layering.sh libqueue [ROOT]  libqueue/ is pure: no CAF, no RocksDB,
#                                              no Asio/Beast, no threads, no clock reads
#   scripts/check-layering.sh actors   [ROOT]  actors/ includes RocksDB only in persistence*
#
# Scans C/C++ source files (.h .hh .hpp .hxx .ipp .inl .tpp .c .cc .cpp .cxx).
# // line comments are ignored, so a comment may name a forbidden header.
# Exit 0 when clean, 1 on a violation (each printed as file:line: text), 2 on misuse.
set -euo pipefail

mode="${1:-}"
root="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

list_sources() {  # $1: directory; prints NUL-separated paths
  [ -d "$1" ] || return 0
  find "$1" -type f \( -name '*.h' -o -name '*.hh' -o -name '*.hpp' -o -name '*.hxx' \
    -o -name '*.ipp' -o -name '*.inl' -o -name '*.tpp' -o -name '*.c' -o -name '*.cc' \
    -o -name '*.cpp' -o -name '*.cxx' \) -print0 | sort -z
}

# scan REGEX FILE...: print file:line: text for each line (comment-stripped) matching REGEX.
scan() {
  local re="$1"; shift
  [ "$#" -gt 0 ] || return 0
  awk -v re="$re" '{ line = $0; sub(/\/\/.*/, "", line); if (line ~ re) printf "%s:%d: %s\n", FILENAME, FNR, $0 }' "$@"
}

ws='[[:space:]]*'
inc="^${ws}#${ws}include${ws}"

case "$mode" in
  libqueue)
    mapfile -d '' files < <(list_sources "$root/libqueue")
    re_inc="${inc}[<\"](caf/|rocksdb/|boost/asio|boost/beast)"
    re_thr="${inc}<(thread|mutex|shared_mutex|condition_variable|future|stop_token)>"
    re_clk="(system|steady|high_resolution|utc|tai|gps|file)_clock${ws}::${ws}now([^A-Za-z0-9_]|$)|(^|[^A-Za-z0-9_])(clock_gettime|gettimeofday)${ws}\\("
    out="$(scan "$re_inc|$re_thr|$re_clk" "${files[@]}")"
    rule="libqueue/ must not include CAF, RocksDB, Boost.Asio/Beast, <thread>/<mutex>/... or read a clock (take 'now' as a parameter)"
    ;;
  actors)
    mapfile -d '' all < <(list_sources "$root/actors")
    files=()
    for f in "${all[@]}"; do
      case "$(basename "$f")" in persistence*) ;; *) files+=("$f") ;; esac
    done
    out="$(scan "${inc}[<\"]rocksdb/" "${files[@]}")"
    rule="actors/ may include RocksDB only in files named persistence*"
    ;;
  *)
    echo "usage: $0 {libqueue|actors} [ROOT]" >&2
    exit 2
    ;;
esac

if [ -n "$out" ]; then
  echo "LAYERING VIOLATION: $rule" >&2
  echo "$out" >&2
  exit 1
fi
echo "layering ($mode): OK, ${#files[@]} files checked"
