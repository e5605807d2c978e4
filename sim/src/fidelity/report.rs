//! `docs/fidelity.md` from the probes' figures: a table per probe (each series' samples on
//! each side: count, min, median, max), whether the two sides agree, and the known
//! differences with their reasons.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::Figures;

/// Where the verdict rates of live matrix runs are: a second command writes them, as each
/// cell runs for seconds of real time per repeat.
pub const LIVE_MATRIX: &str = "## Matrix cells, simulated and live\n\n\
The matrix files' cells run live against real processes (`locksim live scenarios/matrix/<file> \
--scheme <id> --backend redis-server --repeat 10`, Wilson intervals) are compared with the \
simulation's seeds in [fidelity-matrix.md](fidelity-matrix.md), written by \
`bash scripts/fidelity-matrix.sh` (a cell takes its run's real time per repeat: minutes per \
file). Replication and Sentinel links cross the simulated network there as the clients' do \
(docs/live.md), so server-to-server faults and `replica_lag_ms` apply; what the real processes \
cannot get (a machine crash) is listed there from each run's \
`faults_not_applied`. The same page compares the catalog's (non-matrix) scenarios, each with \
its own scheme (`bash scripts/fidelity-matrix.sh --catalog`), and lists those that are not \
compared with the reason the script found.\n";

/// Count, min, median and max of `samples`, as a table cell (`–` when empty).
fn summary(samples: &[f64], unit: &str) -> String {
    if samples.is_empty() {
        return "–".into();
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    format!(
        "n={} · {:.0} / **{:.0}** / {:.0} {unit}",
        sorted.len(),
        sorted[0],
        median,
        sorted[sorted.len() - 1]
    )
}

/// The mean of shares in percent.
fn share(samples: &[f64]) -> String {
    if samples.is_empty() {
        return "–".into();
    }
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    format!("{:.0} % (n={})", mean * 100.0, samples.len())
}

/// Whether two distributions overlap: each median lies within the other's range.
fn overlap(a: &[f64], b: &[f64]) -> Option<bool> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let range = |s: &[f64]| {
        let lo = s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let median = |s: &[f64]| {
        let mut v = s.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ((alo, ahi), (blo, bhi)) = (range(a), range(b));
    let (am, bm) = (median(a), median(b));
    Some((blo..=bhi).contains(&am) || (alo..=ahi).contains(&bm))
}

fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len().max(1) as f64
}

/// Whether two series of shares (0 or 1 per run) give the same majority verdict.
fn same_majority(a: &[f64], b: &[f64]) -> Option<bool> {
    (!a.is_empty() && !b.is_empty()).then(|| (mean(a) >= 0.5) == (mean(b) >= 0.5))
}

/// A table of shares per series, each side's share and whether their majorities agree.
fn share_table(out: &mut String, what: &str, series: &BTreeMap<String, (Vec<f64>, Vec<f64>)>) {
    let _ = writeln!(
        out,
        "| {what} | simulation | redis 7.0 | |\n|---|---|---|---|"
    );
    for (name, (simulated, real)) in series {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} |",
            share(simulated),
            share(real),
            verdict(same_majority(simulated, real))
        );
    }
    out.push('\n');
}

fn verdict(agree: Option<bool>) -> &'static str {
    match agree {
        Some(true) => "agree",
        Some(false) => "**differ**",
        None => "not measured",
    }
}

fn series_table(
    out: &mut String,
    what: &str,
    unit: &str,
    series: &BTreeMap<String, (Vec<f64>, Vec<f64>)>,
) {
    let _ = writeln!(
        out,
        "| {what} | simulation (min / **median** / max) | redis 7.0 (min / **median** / max) | |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for (name, (simulated, real)) in series {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} |",
            summary(simulated, unit),
            summary(real, unit),
            verdict(overlap(simulated, real))
        );
    }
    out.push('\n');
}

fn pair(
    simulated: &BTreeMap<String, Vec<f64>>,
    real: &BTreeMap<String, Vec<f64>>,
) -> BTreeMap<String, (Vec<f64>, Vec<f64>)> {
    let mut out: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (k, v) in simulated {
        out.entry(k.clone()).or_default().0 = v.clone();
    }
    for (k, v) in real {
        out.entry(k.clone()).or_default().1 = v.clone();
    }
    out
}

/// The whole page.
pub fn markdown(figures: &Figures) -> String {
    let mut out = String::new();
    let real = figures
        .redis_version
        .as_deref()
        .map_or("not run (`--simulated-only`)".to_string(), |v| {
            format!("redis-server / redis-sentinel {v}")
        });
    let _ = write!(
        out,
        "# Fidelity: the simulated world against real redis-server and redis-sentinel\n\n\
         Written by `locksim fidelity --repeat {n} --out docs/fidelity.md` (issue 26). Each probe runs \
         one distributed behaviour in the simulation (a small scenario, seeds 0..{last}, the fault at a \
         different phase of the wall-clock second on each) and on real processes ({real}, each on its \
         own loopback address, started and reaped by `sim/src/live/redis_server/`), {n} times each. \
         Times are from the fault to the behaviour, in ms of the simulation's time or of the real clock.\n\n",
        n = figures.repeats,
        last = figures.repeats.saturating_sub(1),
    );
    out.push_str(
        "## min-replicas: refusal after the replica stops\n\n\
         One master, one replica, `min-replicas-to-write 1`, `min-replicas-max-lag 1`; the replica \
         stops (pause: SIGSTOP) and a client writes every few ms: when does the master first answer \
         NOREPLICAS? Redis counts good replicas once a second in `replicationCron` with lags in \
         whole seconds (7.0.15 `src/replication.c` 3381-3398, 3758; `src/server.c` 3911); so does \
         the simulation since this probe was written (it had counted per command, with µs \
         precision: 3-37 ms).\n\n",
    );
    series_table(
        &mut out,
        "master",
        "ms",
        &pair(&figures.min_replicas.simulated, &figures.min_replicas.real),
    );
    out.push_str(
        "## Failover: when each Sentinel answers the new master\n\n\
         One master, one replica, three Sentinels (quorum 2, `down-after-milliseconds 1000`); the \
         master is killed (SIGKILL; in the simulation `crash`). Per Sentinel: the time until \
         `SENTINEL get-master-addr-by-name` answers the replica (real: polled every 5 ms; \
         simulation: the leader's `+promoted-slave`, the others' `+switch-master`). A Sentinel \
         starts its pending-PING clock at its first reconnection attempt after the link drops, \
         even when the connection is refused (`sentinelReconnectInstance`, 7.0.15 \
         `src/sentinel.c` 2425-2451): SDOWN comes about `down-after` after the kill, not after the \
         last PONG. The simulation lacked that step (SDOWN 0.2-0.3 s after the kill, first \
         `+switch-master` 1.36-1.51 s) until this probe found it. Which Sentinel leads differs \
         between runs, so the rows are per Sentinel name, not per role.\n\n",
    );
    series_table(
        &mut out,
        "Sentinel",
        "ms",
        &pair(&figures.failover.simulated, &figures.failover.real),
    );
    out.push_str(
        "## Failover: which replica is promoted when their offsets differ\n\n\
         One master, two replicas, three Sentinels (`down-after-milliseconds 1000`); a client \
         takes and releases a `set-nx-px-lua` lock every ~40 ms, the link between the master and \
         one replica is cut 1 s in (a partition in the simulated network, which the real \
         replication link crosses: `sim/src/live/redis_server/links.rs`), so that replica's \
         offset stops while the other's follows; 2-3 s later the master is killed (real: each \
         run is `locksim live --backend redis-server` of the probe's scenario, the promoted \
         replica read from the Sentinels' `+promoted-slave` log lines; simulation: the trace's \
         `+promoted-slave`). Sentinel ranks the candidates by `replica-priority`, then the \
         greater replication offset, then the smaller run id (`compareSlavesForPromotion`, \
         7.0.15 `src/sentinel.c` 4920-4946, called from `sentinelSelectSlave` (4948, its `qsort` at 4985); the model's \
         `select_slave`, `sim/src/nodes/sentinel/failover.rs`, the same with the node's name as \
         run id). The replica held behind alternates between runs: with equal offsets the \
         tie-break does not depend on which one is behind (Redis: random run ids; the model: \
         always `replica-1`), so only the offset promotes the up-to-date replica in every run. Per replica held behind: the share of runs promoting \
         the other, among the runs that promoted one; then the share of runs with no promotion \
         by the end of the run (8 s after the kill: an election without a majority is retried \
         only after twice the failover timeout).\n\n",
    );
    share_table(
        &mut out,
        "replica behind",
        &pair(&figures.promotion.simulated, &figures.promotion.real),
    );
    out.push_str(
        "## Acknowledged writes kept by a process crash (kill -9), per appendfsync\n\n\
         Real: 20 `SET lock-i tok NX PX 20000` acknowledged, `kill -9` at once, restarted from \
         its AOF: the share of keys back (`DBSIZE`). Simulation: the lock key of one acquisition, \
         the master crashed at its grant and restarted 100 ms later; the last column is the same \
         with the machine's `power_loss` instead (simulation only).\n\n\
         | appendfsync | simulation | redis 7.0 | | simulation, power loss |\n|---|---|---|---|---|\n",
    );
    for (policy, (simulated, real)) in pair(&figures.crash_aof.simulated, &figures.crash_aof.real) {
        let power_loss = figures
            .power_loss_aof
            .simulated
            .get(&policy)
            .cloned()
            .unwrap_or_default();
        let agree = same_majority(&simulated, &real);
        let _ = writeln!(
            out,
            "| {policy} | {} | {} | {} | {} |",
            share(&simulated),
            share(&real),
            verdict(agree),
            share(&power_loss)
        );
    }
    out.push_str(
        "\nA `crash` is the process dying: the kernel keeps what it wrote to the AOF, fsynced or \
         not, and the restart reads it (redis.io persistence: \"if the process crashes ... the OS \
         will still write the data\"), as on real processes. A `power_loss` is the machine going \
         down: only what was fsynced survives. It cannot be produced on loopback; the simulation \
         follows Redis's persistence code instead (7.0.15 `src/aof.c` `flushAppendOnlyFile`: the \
         buffer is written (`write(2)`) in `beforeSleep` before replies go out, fsynced before the reply \
         for `always`, by a background job once a second for `everysec`, by the OS for `no`), so \
         a write acknowledged less than a second before the power went is lost with `everysec` \
         and `no`, kept with `always`.\n\n",
    );
    out.push_str(
        "## Key expiry after a forward clock jump, on a master and on a replica\n\n\
         One master, one replica; the lock key is written with a 10 s TTL (simulation: one \
         `set-nx-px-lua` acquisition), then one node's clock jumps 20 s ahead (real: our clock \
         shim, `sim/src/live/redis_server/clock.rs`). Per node jumped and node read: the share \
         of runs where a read of the key on that node answers nil within 1 s (real: `GET` every \
         5 ms; simulation: the node's `key_owner` becomes none). Each node decides expiry on its \
         own wall clock (`keyIsExpired`, 7.0.15 `src/db.c` 1616-1650, `mstime()` = \
         `gettimeofday`, `src/server.c` 189-202): a jumped master expires the key and \
         propagates a DEL, so the replica loses it too; a jumped replica answers nil but deletes \
         nothing and propagates nothing (`expireIfNeeded`, `src/db.c` 1698-1701), so the master \
         keeps the key until its own TTL.\n\n",
    );
    share_table(
        &mut out,
        "jumped, read",
        &pair(&figures.clock_expiry.simulated, &figures.clock_expiry.real),
    );
    out.push_str(
        "## Sentinel TILT after a clock jump\n\n\
         One master, one replica, one Sentinel (quorum 1, `down-after-milliseconds 1000`); the \
         Sentinel's clock jumps 10 s ahead, and 500 ms later the master is killed. \
         `sentinelCheckTiltCondition` (7.0.15 `src/sentinel.c` 5344-5354) compares `mstime()` \
         between two timer ticks: more than 2 s (or negative) enters TILT for 30 s, during which \
         the Sentinel monitors but neither marks SDOWN nor fails over \
         (`sentinelHandleRedisInstance`, `src/sentinel.c` 5271-5279). First the time from the \
         jump to TILT (real: `INFO sentinel` `sentinel_tilt:1`, polled every 5 ms; simulation: \
         `+tilt`), then the share of runs that failed over within 4 s of the kill (real: \
         `get-master-addr-by-name` answers the replica; simulation: `+promoted-slave`); without \
         the jump a failover takes about 2 s.\n\n",
    );
    let (tilt_ms, failover): (BTreeMap<_, _>, BTreeMap<_, _>) =
        pair(&figures.tilt.simulated, &figures.tilt.real)
            .into_iter()
            .partition(|(name, _)| name == "tilt");
    series_table(&mut out, "Sentinel", "ms", &tilt_ms);
    share_table(&mut out, "during TILT", &failover);
    out.push_str(
        "## An old master rejoining after a failover\n\n\
         One master, one replica, three Sentinels (`down-after-milliseconds 1000`); the lock key \
         is written and replicated, the master is paused (SIGSTOP) 4 s, the replica is promoted \
         meanwhile, the old master resumes and 200 ms later acknowledges the lock's release (a \
         `DEL` on the client's existing connection; simulation: a `set-nx-px-lua` client's \
         release). A Sentinel converts a resumed old master to a replica only at an `INFO` reply \
         more than four publish periods (8 s) after it first reported itself a master (7.0.15 \
         `src/sentinel.c` 2704-2718); its resync from the new master then replaces its data \
         set. First the time from the resume to `REPLICAOF` (real: `INFO replication` \
         `role:slave`; simulation: its role event), then the share of runs where the release it \
         acknowledged is undone (the key is back on both nodes once it replicates).\n\n",
    );
    let (dropped, demoted): (BTreeMap<_, _>, BTreeMap<_, _>) =
        pair(&figures.rejoin.simulated, &figures.rejoin.real)
            .into_iter()
            .partition(|(name, _)| name == "write dropped");
    series_table(&mut out, "old master", "ms", &demoted);
    share_table(&mut out, "acknowledged by the old master", &dropped);
    out.push_str(
        "## WAIT with one replica stopped\n\n\
         One master, two replicas, the second paused (SIGSTOP); a client writes a key, then sends \
         `WAIT 1 1000` and `WAIT 2 1000` (the simulation: the same commands from a client of the \
         probe's own to the simulated nodes). `waitCommand` (7.0.15 `src/replication.c` \
         3461-3495) answers at once when enough replicas acknowledged the write's offset; else \
         it asks them for an ACK (`REPLCONF GETACK`) and blocks until enough did or the \
         timeout passed, answering how many did.\n\n",
    );
    let (replicas, ms): (BTreeMap<_, _>, BTreeMap<_, _>) =
        pair(&figures.wait.simulated, &figures.wait.real)
            .into_iter()
            .partition(|(name, _)| name.ends_with("replicas"));
    series_table(&mut out, "answer", "replicas", &replicas);
    series_table(&mut out, "duration", "ms", &ms);
    out.push_str(KNOWN_DIFFERENCES);
    out.push('\n');
    out.push_str(LIVE_MATRIX);
    out
}

/// What differs on purpose or is not modelled, with the reason.
const KNOWN_DIFFERENCES: &str = "## Known differences\n\n\
| what | simulation | redis 7.0 | why |\n|---|---|---|---|\n\
| first sync of a replica | the snapshot is sent at once | `repl-diskless-sync-delay 5` s before a diskless full sync | no fork is modelled; the probes' real processes run with `repl-diskless-sync-delay 0` |\n\
| phase of the wall-clock second | every node starts at a whole second of the epoch, its 1 Hz crons on whole seconds | processes start at any phase | with scripted faults at whole seconds, min-replicas refuses 1.0 s after the cut; faults at other phases give 1-2 s, as real processes started together |\n\
| hello messages | sent directly to each Sentinel | also relayed through the monitored instances' Pub/Sub | a Sentinel that misses the direct hello learns the switch up to 2 s later in Redis; measured spread between Sentinels: see the failover table |\n\
| kill -9 with `everysec` | every acknowledged write is in the page cache | some runs lose some (see the AOF table) | `flushAppendOnlyFile` (7.0.15 `src/aof.c`) postpones the `write(2)` for up to 2 s while a background fsync is still running (`aof_flush_postponed_start`), and the replies go out meanwhile: on a busy disk an acknowledged write can still be in Redis's own buffer when the process dies. Not modelled (the simulation's fsync takes no time) |\n\
| `WAIT`'s timeout | `WAIT 2 1000` answers at its deadline (1000 ms + the reply's way) | it answers when the event loop next wakes after the deadline: up to about 100 ms later (see the WAIT table) | Redis unblocks timed-out clients in `beforeSleep` (`handleBlockedClientsTimeout`, 7.0.15 `src/server.c` 1585, `src/timeout.c` 138-157), and with nothing else to do the loop wakes for `serverCron` (hz 10: up to 100 ms late). Not changed in the model: it would move the timing of every scheme that sends `WAIT` (the Redisson rows) |\n\
| network latency | every message takes 1-5 ms (`network.latency_ms`, default) | loopback: tens of µs | `WAIT 1` with a running replica needs a `REPLCONF GETACK` round trip: about 20 ms in the simulation, under 1 ms on loopback; the mechanism (block, GETACK, answer on the ACK) is the same |\n\
| clock drift of a server | a drifting node's timers (cron, active expiry, Sentinel's timer) fire at its rate | the clock shim changes what the process reads, not when the kernel wakes it: `epoll_wait` timeouts keep real time | an LD_PRELOAD shim cannot slow the kernel's timers; a jump (the probes above) is exact |\n\
| power loss | `power_loss`: un-fsynced AOF and bytes in flight lost, peers hear nothing until their timeouts | not produced on loopback | a machine crash needs a VM or a second host; the simulation follows `aof.c` (see the AOF table) |\n";
