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
pub mod nemesis;
pub mod netlayer;
pub mod persistence;
pub mod redis_node;
pub mod replay;
pub mod replication;
pub mod resource;
pub mod runner;
pub mod scenario;
pub mod sentinel;
pub mod serve;
pub mod serve_host;
pub mod signal;
pub mod sweep;
pub mod world;

use std::net::{IpAddr, Ipv4Addr};

/// `locksim schemes`: every scheme of the catalog, one per line (`id  summary  [source]`), or
/// with `json` a JSON array of `{id, summary, source, default_ttl_ms}` (0: no TTL).
pub fn schemes_listing(json: bool) -> String {
    let schemes = model::locks::SCHEMES;
    if json {
        let list: Vec<serde_json::Value> = schemes
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "summary": s.summary,
                    "source": s.source,
                    "default_ttl_ms": s.default_ttl_ms,
                })
            })
            .collect();
        return serde_json::to_string_pretty(&list).expect("JSON values serialise") + "\n";
    }
    let width = schemes.iter().map(|s| s.id.len()).max().unwrap_or(0);
    schemes
        .iter()
        .map(|s| {
            format!(
                "{:width$}  {}\n{:width$}  source: {}\n",
                s.id, s.summary, "", s.source
            )
        })
        .collect()
}

/// Every Redis node listens here.
pub const REDIS_PORT: u16 = 6379;
/// Every Sentinel listens here.
pub const SENTINEL_PORT: u16 = 26379;

/// The simulated IP address of a node, from its name: `redis-N` 10.1.x.x, `client-N` 10.2.x.x,
/// `resource` 10.3.0.1, `redis-N-replica-M` 10.4.N.M, `sentinel-N` 10.5.x.x, `nemesis` 10.9.0.1,
/// `network` 10.9.0.2.
pub fn node_ip(name: &str) -> IpAddr {
    if let Some((master, replica)) = name
        .strip_prefix("redis-")
        .and_then(|rest| rest.split_once("-replica-"))
    {
        let m = master.parse::<u8>().unwrap_or(0);
        let r = replica.parse::<u8>().unwrap_or(0);
        return IpAddr::V4(Ipv4Addr::new(10, 4, m, r));
    }
    let (net, index) = if let Some(n) = name.strip_prefix("redis-") {
        (1, n.parse::<u32>().unwrap_or(0))
    } else if let Some(n) = name.strip_prefix("sentinel-") {
        (5, n.parse::<u32>().unwrap_or(0))
    } else if name == "network" {
        (9, 2)
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
