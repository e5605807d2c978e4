//! `locksim fidelity`: the simulated world measured against real redis-server and
//! redis-sentinel 7.0 (issue 26). Each probe (`probes`) runs one distributed behaviour in both
//! worlds with the same topology and fault; `report` writes `docs/fidelity.md` from the
//! figures: each probe's distribution on each side, whether they agree, and the known
//! differences with their reasons.
//!
//! The verdict rates of live matrix runs (`locksim live --backend redis-server`) take minutes
//! of real time per file: `scripts/fidelity-matrix.sh` writes them to docs/fidelity-matrix.md,
//! and `report::LIVE_MATRIX` points there.

pub mod probes;
pub mod report;

use std::path::Path;

use crate::live::process::Supervisor;
use crate::live::redis_server::Binaries;
use probes::{
    Real, Samples, clock_expiry, crash_aof, failover, min_replicas, promotion, rejoin, tilt, wait,
};

/// Every probe's figures.
pub struct Figures {
    pub repeats: u32,
    pub min_replicas: Samples,
    pub failover: Samples,
    /// Per replica held behind: the share of runs promoting the other, up-to-date one.
    pub promotion: Samples,
    pub crash_aof: Samples,
    /// The same probe with a `power_loss`: simulated only (not producible on loopback).
    pub power_loss_aof: Samples,
    /// Per (node jumped, node read): the share of runs whose read answers nil after the jump.
    pub clock_expiry: Samples,
    /// `tilt` (ms from a Sentinel's clock jump to TILT) and `failover` (share of runs that
    /// failed over during TILT).
    pub tilt: Samples,
    /// `demoted` (ms from an old master's resume to its REPLICAOF) and `write dropped` (share
    /// of runs whose write acknowledged by it meanwhile is gone).
    pub rejoin: Samples,
    /// Per `WAIT` command, with one of two replicas stopped: its answer and its duration.
    pub wait: Samples,
    /// The redis-server the real side ran (`redis-server --version`), if it ran.
    pub redis_version: Option<String>,
}

/// Runs every probe `repeats` times in the simulation and, unless `simulated_only`, on real
/// processes under `dir`.
pub fn measure(
    repeats: u32,
    simulated_only: bool,
    binaries: Binaries,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<Figures, String> {
    let mut figures = Figures {
        repeats,
        min_replicas: Samples::default(),
        failover: Samples::default(),
        promotion: Samples::default(),
        crash_aof: Samples::default(),
        power_loss_aof: Samples::default(),
        clock_expiry: Samples::default(),
        tilt: Samples::default(),
        rejoin: Samples::default(),
        wait: Samples::default(),
        redis_version: None,
    };
    progress("min-replicas refusal (simulated)");
    figures
        .min_replicas
        .simulated
        .insert("redis-1".into(), min_replicas::simulated(repeats)?);
    progress("failover per Sentinel (simulated)");
    figures.failover.simulated = failover::simulated(repeats)?;
    progress("promotion with a replica behind (simulated)");
    figures.promotion.simulated = promotion::simulated(repeats)?;
    for policy in crash_aof::POLICIES {
        progress(&format!("kill -9 with appendfsync {policy} (simulated)"));
        figures.crash_aof.simulated.insert(
            policy.into(),
            crash_aof::simulated("crash", policy, repeats)?,
        );
        progress(&format!("power loss with appendfsync {policy} (simulated)"));
        figures.power_loss_aof.simulated.insert(
            policy.into(),
            crash_aof::simulated("power_loss", policy, repeats)?,
        );
    }
    progress("key expiry after a clock jump (simulated)");
    figures.clock_expiry.simulated = clock_expiry::simulated(repeats)?;
    progress("Sentinel TILT after a clock jump (simulated)");
    figures.tilt.simulated = tilt::simulated(repeats)?;
    progress("an old master rejoining (simulated)");
    figures.rejoin.simulated = rejoin::simulated(repeats)?;
    progress("WAIT with a stopped replica (simulated)");
    figures.wait.simulated = wait::simulated(repeats)?;
    if simulated_only {
        return Ok(figures);
    }
    figures.redis_version = Some(version(&binaries)?);
    let supervisor = Supervisor::new().map_err(|e| format!("cannot start the supervisor: {e}"))?;
    let real = Real {
        supervisor: &supervisor,
        binaries,
        dir,
    };
    progress("min-replicas refusal (redis-server)");
    figures
        .min_replicas
        .real
        .insert("redis-1".into(), min_replicas::real(&real, repeats)?);
    progress("failover per Sentinel (redis-sentinel)");
    figures.failover.real = failover::real(&real, repeats)?;
    progress("promotion with a replica behind (redis-server, redis-sentinel)");
    let locksim = std::env::current_exe()
        .map_err(|e| format!("cannot find the locksim binary to run the probe's client: {e}"))?;
    figures.promotion.real = promotion::real(&real, &locksim, repeats)?;
    for policy in crash_aof::POLICIES {
        progress(&format!("kill -9 with appendfsync {policy} (redis-server)"));
        figures
            .crash_aof
            .real
            .insert(policy.into(), crash_aof::real(&real, policy, repeats)?);
    }
    progress("key expiry after a clock jump (redis-server)");
    figures.clock_expiry.real = clock_expiry::real(&real, repeats)?;
    progress("Sentinel TILT after a clock jump (redis-sentinel)");
    figures.tilt.real = tilt::real(&real, repeats)?;
    progress("an old master rejoining (redis-server, redis-sentinel)");
    figures.rejoin.real = rejoin::real(&real, repeats)?;
    progress("WAIT with a stopped replica (redis-server)");
    figures.wait.real = wait::real(&real, repeats)?;
    Ok(figures)
}

/// `redis-server --version`, or why it cannot run.
fn version(binaries: &Binaries) -> Result<String, String> {
    let out = std::process::Command::new(&binaries.redis_server)
        .arg("--version")
        .output()
        .map_err(|e| {
            format!(
                "cannot run {}: {e} (`apt-get install redis-server redis-sentinel`)",
                binaries.redis_server.to_string_lossy()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("unknown")
        .to_string())
}
