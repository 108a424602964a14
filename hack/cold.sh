#!/usr/bin/env bash
# Times a newcomer's first two commands on this machine: a fresh clone of this checkout's HEAD, empty
# module and build caches, nothing in bin/, then `make demo` and `make test`, each line of their
# output time-stamped (docs/e2e.md, "Time, measured"). Takes about 40 minutes on 2 cores; run it on
# an otherwise idle machine.
#
# Usage: hack/cold.sh <empty-or-missing-dir>   (results in <dir>/times, <dir>/demo.log, <dir>/test.log)
set -u
dir=${1:?a folder for the clone, the caches and the logs}
src=$(git rev-parse --show-toplevel)
if [ -d "$dir/mod" ]; then chmod -R u+w "$dir/mod"; fi
rm -rf "$dir" && mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
export GOMODCACHE=$dir/mod GOCACHE=$dir/cache
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%T)" "$l"; done; }
start=$(date +%s)
git clone -q "$src" "$dir/src" && cd "$dir/src" || exit 1
echo "clone $(git rev-parse --short HEAD) at $(date +%T)" >> "$dir/times"
for target in demo test; do
  s=$(date +%s)
  make "$target" 2>&1 | stamp > "$dir/$target.log"
  echo "$target rc=${PIPESTATUS[0]} $(( $(date +%s)-s ))s at $(date +%T)" >> "$dir/times"
done
echo "total $(( $(date +%s)-start ))s" >> "$dir/times"
cat "$dir/times"
