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

pub mod artifacts;
pub mod batch;
pub mod bench;
pub mod catalog;
pub mod check;
pub mod client;
pub mod clock;
pub mod compare;
pub mod conn;
pub mod expect;
pub mod faults;
pub mod interrupt;
pub mod redis_node;
pub mod replay;
pub mod resource;
pub mod runner;
pub mod scenario;
pub mod sweep;
pub mod world;

use std::net::{IpAddr, Ipv4Addr};

/// Every Redis node listens here.
pub const REDIS_PORT: u16 = 6379;

/// The simulated IP address of a node, from its name: `redis-N` 10.1.x.x, `client-N` 10.2.x.x,
/// `resource` 10.3.0.1, `nemesis` 10.9.0.1.
pub fn node_ip(name: &str) -> IpAddr {
    let (net, index) = if let Some(n) = name.strip_prefix("redis-") {
        (1, n.parse::<u32>().unwrap_or(0))
    } else if let Some(n) = name.strip_prefix("client-") {
        (2, n.parse::<u32>().unwrap_or(0))
    } else if name == "resource" {
        (3, 1)
    } else {
        (9, 1)
    };
    IpAddr::V4(Ipv4Addr::new(
        10,
        net,
        (index >> 8) as u8,
        (index & 0xff) as u8,
    ))
}
