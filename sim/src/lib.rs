//! The simulated world of locksim (madsim) and everything the `locksim` binary does with it.
//!
//! The modules are layers; each uses only the ones listed before it (`tests/layout.rs` checks
//! this, and that no modules use each other in a circle):
//! - `signal`: the deterministic wake-up the simulation's tasks wait on.
//! - `scenario`: what a run is — the scenario file with its faults, nemesis, seed ranges and
//!   expectations, validated.
//! - `world`: one run's simulated resources — time, network, disks, process table, history —
//!   each owning its state and the hooks its faults call; `World` composes them.
//! - `nodes`: the processes — Redis (with its replication and persistence), Sentinel, the lock
//!   client and its workload, the protected resource — and the RESP connection they share.
//! - `faults`: what each fault kind does to the world, when scripted faults fire, the random
//!   nemesis.
//! - `runner`: one scenario × scheme × seed, end to end.
//! - `serve`: the simulated Redis on a real TCP port, outside the simulation.
//! - `live`: real time and real processes: the executor of `locksim live`, the real
//!   redis-server/redis-sentinel processes of a topology.
//! - `fidelity`: the simulated world measured against real redis-server and redis-sentinel
//!   (`locksim fidelity`, `docs/fidelity.md`).
//! - `conform`: each modelled lock library checked against the real library (run against
//!   `locksim serve` processes) or its source, command for command.
//! - `hunt`: a search over fault schedules guided by marks (`model::marks`), a corpus and
//!   AFL-style mutations (`locksim hunt`).
//! - `cli`: the commands of the binary and their helpers.
//!
//! A refactor must leave every trace as it was: `scripts/trace-hashes.sh` lists the trace hash
//! of every catalog scenario × scheme × seed; `diff` the list from before and after.

pub mod cli;
pub mod conform;
pub mod faults;
pub mod fidelity;
pub mod hunt;
pub mod live;
pub mod nodes;
pub mod runner;
pub mod scenario;
pub mod serve;
pub mod signal;
pub mod world;
