#!/usr/bin/env bash
# The benchmark of issue 33: on each target class, CAMPAIGNS campaigns each of the random
# nemesis, swarm draws and `locksim hunt` (each campaign on its own seeds), the runs each needs
# to its first violation within a budget of runs, and the distinct features reached in N runs
# (`locksim hunt --bench`, sim/src/hunt/bench.rs). Prints one Markdown table per class (the
# README's "Hunt" section shows them); progress goes to stderr.
# Usage: bash scripts/hunt-bench.sh [CAMPAIGNS] [JOBS]   (defaults 20 and 2)
# Classes:
#  - two faults: a WAIT acknowledged by one replica, then a failover to the other (Redisson
#    4.7 through Sentinel, 1 master + 2 replicas); a forward clock jump on the master, then a
#    pause of the holder (Redisson 3.12.5, 1 master); and two held out from tuning, set-nx-px-lua
#    on 1 master: a pause of the holder, then its resource calls delayed; a forward clock jump
#    on the master, then the holder's resource calls delayed;
#  - single faults (matrix columns): random pauses and random failovers, set-nx-px-lua.
# For the two-fault classes `--mechanism` names the class's path as marks in order: a campaign
# stops only at a violation whose run fired them in that order, the table counts the other
# violations seen on the way (another mechanism the class let through), and gives hunt's
# violations and runs per input origin. For them `--toward` adds a fourth search, `hunt
# --toward`: hunt directed along the same marks (a user saying "look near here"); `hunt` is
# the blind search. The WAIT class's budget (400 runs) is past the random
# nemesis's median on it (about 100 runs).
set -euo pipefail
cd "$(dirname "$0")/.."
campaigns=${1:-20}
jobs=${2:-2}
cargo build --release --quiet
bench() {
  local file=$1 max_runs=$2
  shift 2
  ./target/release/locksim hunt "$file" "$@" --bench --campaigns "$campaigns" \
    --max-runs "$max_runs" --feature-runs 30 --feature-campaigns 5 --jobs "$jobs"
  echo
}
wait_path=wait_partially_acked,promoted_while_held
jump_path=clock_jump_while_held,lock_key_expired
bench scenarios/hunt/wait-one-replica-then-failover.json 400 \
  --mechanism "$wait_path" --toward "$wait_path"
bench scenarios/hunt/clock-jump-then-pause.json 300 \
  --mechanism "$jump_path" --toward "$jump_path"
bench scenarios/hunt/pause-then-delay.json 300 \
  --mechanism lock_key_expired --toward lock_key_expired
bench scenarios/hunt/clock-jump-then-delay.json 300 \
  --mechanism "$jump_path" --toward "$jump_path"
bench scenarios/matrix/05-random-pauses.json 50 --scheme set-nx-px-lua
bench scenarios/matrix/18-random-failover.json 50 --scheme set-nx-px-lua
