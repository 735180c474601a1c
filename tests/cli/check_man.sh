#!/usr/bin/env bash
# ctest cli.man_page_renders_without_warnings (issue 25 §2): laneq(1) as CMake made it
# (share/man/man1/laneq.1, and its .gz) is what `laneq man` prints, names every command
# `laneq --help` lists, and groff renders it with every warning enabled and none given.
# Exits 77 (skipped) when groff is not installed.
#
# laneqd(8) (packaging/laneqd.8, written by hand) names every option `laneqd --help` lists and
# renders without warnings too.
#
#   check_man.sh LANEQ BUILT_PAGE [LANEQD LANEQD_PAGE]
set -euo pipefail

laneq="$1" page="$2" laneqd="${3:-}" laneqd_page="${4:-}"
fail() { echo "MAN PAGE TEST FAILED: $*" >&2; exit 1; }

cmp -s <("$laneq" man) "$page" || fail "$page is not what laneq man prints"
cmp -s <(gzip -dc "$page.gz") "$page" || fail "$page.gz is not $page gzipped"
listed=$("$laneq" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z]\+\( [a-z]\+\)\?\) .*/\1/p')
[ -n "$listed" ] || fail "laneq --help lists no commands"
while read -r words; do
  grep -q "^\.SS \"$words[ \"]" "$page" || fail "no section for \"$words\""
done <<< "$listed"
if [ -n "$laneqd" ]; then
  for option in $("$laneqd" --help | grep -o -- '--[a-z-]*' | sort -u); do
    grep -qF -- "\\fB${option//-/\\-}\\fR" "$laneqd_page" || fail "laneqd.8 lacks $option"
  done
fi
if ! command -v groff > /dev/null; then
  echo "groff is not installed: the rendering is not checked"
  exit 77
fi
for p in "$page" ${laneqd:+"$laneqd_page"}; do
  warnings=$(groff -man -Tutf8 -ww -z "$p" 2>&1) || fail "groff failed on $p: $warnings"
  [ -z "$warnings" ] || fail "groff warns on $p: $warnings"
done
lines=$(groff -man -Tutf8 "$page" 2> /dev/null | wc -l)
[ "$lines" -gt 100 ] || fail "the page renders to $lines lines only"
echo "man page ok: $(wc -l <<< "$listed") commands, $lines lines"
