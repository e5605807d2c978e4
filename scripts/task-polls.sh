#!/usr/bin/env bash
# Task polls per event and per message of a scenario, and of madsim's floor (`bench --floor`).
#
# Why: madsim draws from its one RNG at every poll (`Executor::run_all_ready` picks the next ready
# task at random and advances the clock 50–100 ns), so the number of polls a run makes is fixed by
# its trace. Speed work that keeps every trace hash (issue 15's rule) can only make each poll
# cheaper; the ratio of polls per message is what `bench --floor`'s ratio tends to when ours cost
# what the floor's cost.
#
# How: a uprobe on madsim's `TimeHandle::advance`, called once per poll (checked against
# callgrind's call counts of `RawTask::run`). Needs root, perf and a kernel with uprobes.
#
# Usage: scripts/task-polls.sh [SCENARIO] [SEEDS]
#   defaults: scenarios/baseline-set-nx-px-lua.json 0..199; ./target/release/locksim (build it
#   first with `cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/.."

scenario=${1:-scenarios/baseline-set-nx-px-lua.json}
seeds=${2:-0..199}
bin=$(realpath ./target/release/locksim)
[ -x "$bin" ] || { echo "task-polls: $bin is missing: run cargo build --release" >&2; exit 1; }
command -v perf >/dev/null || { echo "task-polls: perf is not installed" >&2; exit 1; }

tracefs=/sys/kernel/tracing
[ -d "$tracefs/events" ] || tracefs=/sys/kernel/debug/tracing
[ -w "$tracefs/uprobe_events" ] || { echo "task-polls: $tracefs/uprobe_events is not writable (root and uprobes needed)" >&2; exit 1; }

symbol=$(nm "$bin" | awk '/_ZN6madsim3sim4time10TimeHandle7advance17h/ && !found { print $1; found = 1 }')
[ -n "$symbol" ] || { echo "task-polls: madsim's TimeHandle::advance is not in $bin's symbols" >&2; exit 1; }
# The uprobe takes a file offset: the symbol's address less its executable segment's shift.
offset=
while read -r type file_offset vaddr _ _ memsize flags; do
  if [ "$type" = LOAD ] && [[ $flags == *E* ]] \
      && (( 16#$symbol >= vaddr && 16#$symbol < vaddr + memsize )); then
    offset=$(printf '0x%x' $((16#$symbol - vaddr + file_offset)))
  fi
done < <(readelf -lW "$bin" | grep ' LOAD ')
[ -n "$offset" ] || { echo "task-polls: cannot place the symbol in $bin's segments" >&2; exit 1; }

probe=locksim_task_poll
echo "-:$probe" >> "$tracefs/uprobe_events" 2>/dev/null || true
echo "p:$probe $bin:$offset" >> "$tracefs/uprobe_events"
trap 'echo "-:$probe" >> "$tracefs/uprobe_events" 2>/dev/null || true' EXIT

# Runs `locksim bench` under the probe; prints "<polls> <bench output>".
polls_of() {
  local out stat
  out=$(mktemp) stat=$(mktemp)
  perf stat -x, -e "uprobes:$probe" -o "$stat" "$bin" bench "$@" > "$out" 2>&1
  echo "$(awk -F, '/uprobes/ { print $1 }' "$stat") $(tr '\n' ' ' < "$out")"
  rm -f "$out" "$stat"
}

read -r scenario_polls scenario_out <<< "$(polls_of "$scenario" --seeds "$seeds")"
read -r both_polls both_out <<< "$(polls_of "$scenario" --seeds "$seeds" --floor)"
events=$(grep -o '[0-9]* events' <<< "$scenario_out" | cut -d' ' -f1)
messages=$(grep -o '[0-9]* messages)' <<< "$scenario_out" | cut -d' ' -f1)
floor_messages=$(grep -o '[0-9]* messages, ' <<< "$both_out" | cut -d' ' -f1)
floor_polls=$((both_polls - scenario_polls))

awk -v sp="$scenario_polls" -v e="$events" -v m="$messages" -v fp="$floor_polls" -v fm="$floor_messages" \
    -v name="$(basename "$scenario" .json)" -v seeds="$seeds" 'BEGIN {
  printf "%s, seeds %s: %d task polls, %.2f per event, %.2f per message\n", name, seeds, sp, sp / e, sp / m
  printf "madsim floor: %d task polls, %.2f per message\n", fp, fp / fm
  printf "polls per message: %.2fx the floor'"'"'s\n", (sp / m) / (fp / fm)
}'
