#!/usr/bin/env bash
# checkgen.sh — fail when regenerating changes the generated code.
#
#   scripts/checkgen.sh PATH... -- CMD [ARGS...]
#
# Runs CMD (`make generate`) and exits 1 if it changed, added or removed any
# file under the PATHs, compared with the tree before CMD ran: in a clean
# checkout (CI) that means the committed generated code is stale; in a work
# tree with edits it means the edits were not regenerated.
set -euo pipefail

paths=()
while [[ $# -gt 0 && $1 != -- ]]; do paths+=("$1"); shift; done
[[ $# -ge 2 && ${#paths[@]} -gt 0 ]] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
shift

state() {  # what the PATHs hold now, relative to HEAD, untracked files included
  git status --porcelain --untracked-files=all -- "${paths[@]}"
  git diff --no-ext-diff --binary HEAD -- "${paths[@]}"
  git ls-files --others --exclude-standard -z -- "${paths[@]}" | xargs -0r sha256sum
}

before=$(state | sha256sum)
"$@"
after=$(state | sha256sum)
if [[ $before != "$after" ]]; then
  echo "checkgen: generated code is not current: regenerating changed it (run \`make generate\` and commit the result):" >&2
  git status --short --untracked-files=all -- "${paths[@]}" >&2
  exit 1
fi
echo "checkgen: generated code is current"
