#!/usr/bin/env bash
# ctest cli.bash_completion_completes_commands_and_options (issue 25 §2): the completion script
# CMake made (share/bash-completion/completions/laneq) is what `laneq completion bash` prints;
# sourced into bash, `_laneq` completes every command `laneq --help` lists, a group's
# sub-commands, a command's options and the global ones, and file names after a file option.
#
#   check_completion.sh LANEQ BUILT_SCRIPT WORK_DIR
# No `set -e`: compgen fails when nothing matches, which is an answer here.
set -uo pipefail

laneq="$1" built="$2" work="$3"
fail() { echo "COMPLETION TEST FAILED: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
"$laneq" completion bash > "$work/laneq.bash" || fail "laneq completion bash exited non-zero"
cmp -s "$work/laneq.bash" "$built" || fail "$built is not what laneq completion bash prints"
# shellcheck disable=SC1091
source "$work/laneq.bash" || fail "the script does not load"

# The completions _laneq offers for the words given (the last one is being typed).
offers() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _laneq
  echo " ${COMPREPLY[*]} "
}
expect() {
  local want="$1" got
  shift
  got=$(offers "$@")
  [[ $got == *" $want "* ]] || fail "'$*<TAB>' offers '$got', not $want"
}

expect queue laneq qu
expect create laneq queue c
expect redrive laneq dlq re
expect publish laneq topic pu
expect --max laneq receive q --ma
expect --dead-letter-on laneq consume q --dead
expect --url laneq receive q --ur
expect --lease-ms laneq --url http://h:1 extend q L --lea
[[ $(offers laneq send q --delay-ms "") == "  " ]] || fail "a number option's value offers words"
[[ $(offers laneq receive "") == "  " ]] || fail "a command's QUEUE argument offers words"
touch "$work/spec.json"
(cd "$work" && expect spec.json laneq queue create q --spec-file sp) || exit 1

# Every command `laneq --help` lists (`queue create NAME ...`: its first word, then its second).
listed=$("$laneq" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z]\+\)\( [a-z]\+\)\?.*/\1\2/p')
[ -n "$listed" ] || fail "laneq --help lists no commands"
while read -r first second; do
  expect "$first" laneq ""
  if [ -n "$second" ] && [[ $second =~ ^[a-z]+$ ]] && [[ $("$laneq" "$first" "$second" --help) == usage:* ]]; then
    expect "$second" laneq "$first" ""
  fi
done <<< "$listed"
echo "completion ok: $(wc -l <<< "$listed") commands"
