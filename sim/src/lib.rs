//! The simulated world of locksim (madsim) and everything the `locksim` binary does with it.
//!
//! - `world`, `clock`: shared run state, per-node clocks.
//! - `redis_node`, `client`, `resource`: the nodes (server, lock client + workload, protected
//!   resource); `conn` is the RESP client connection they share.
//! - `faults`: the nemesis — fault kinds, their injection and healing.
//! - `scenario`: loading and validating scenario files; `runner`: one seed, end to end.
//! - `batch`, `catalog`, `interrupt`, `artifacts`: many runs over scenarios × schemes × seeds,
//!   which files, Ctrl-C, what a run writes; on them the commands `sweep`, `replay`, `compare`
//!   and `check`.

pub mod cli;
pub mod faults;
pub mod nodes;
pub mod runner;
pub mod scenario;
pub mod serve;
pub mod signal;
pub mod world;
