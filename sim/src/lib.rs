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
pub mod signal;
pub mod world;

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
