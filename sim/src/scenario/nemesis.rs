//! The `nemesis` of a scenario file: which fault kinds the random nemesis draws, how often,
//! for how long and on which nodes, validated against the scenario. What the nemesis does with
//! it is `crate::faults::nemesis`.
//!
//! ```json
//! "nemesis": {
//!   "pause":      { "every_ms": [2000, 8000], "duration_ms": [100, 3000], "nodes": ["client-1"] },
//!   "partition":  { "every_ms": [3000, 9000], "duration_ms": [500, 4000] },
//!   "clock_jump": { "every_ms": [5000, 15000], "delta_ms": [-2000, 30000] },
//!   "crash":      { "every_ms": [5000, 20000], "duration_ms": [0, 2000] },
//!   "heal_at_ms": 40000, "swarm": true
//! }
//! ```

use std::collections::BTreeSet;

use serde_json::Value;

use crate::scenario::faults::{FAULT_KINDS, is_master_name, placeholder};
use crate::scenario::limits::{MAX_LINK_CHANGES, MIN_NEMESIS_EVERY_MS};
use crate::scenario::range::MsRange;

/// The kinds the random nemesis draws, in the order it lists them: every fault kind.
pub const KINDS: &[&str] = FAULT_KINDS;

/// One kind's process.
#[derive(Clone, Debug, PartialEq)]
pub struct KindSpec {
    pub kind: String,
    pub every_ms: MsRange,
    pub duration_ms: Option<MsRange>,
    pub nodes: Vec<String>,
    pub delta_ms: Option<(i64, i64)>,
    pub rate: Option<(f64, f64)>,
    pub extra_ms: Option<MsRange>,
}

/// The validated `nemesis` of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct NemesisSpec {
    pub kinds: Vec<KindSpec>,
    pub heal_at_ms: Option<u64>,
    pub swarm: bool,
}

fn ms_range(value: &Value, field: &str) -> Result<MsRange, String> {
    serde_json::from_value::<MsRange>(value.clone()).map_err(|e| format!("{field}: {e}"))
}

fn pair<T: Copy + PartialOrd + std::fmt::Display>(
    value: &Value,
    field: &str,
    get: impl Fn(&Value) -> Option<T>,
) -> Result<(T, T), String> {
    let (a, b) = match value {
        Value::Array(items) if items.len() == 2 => (get(&items[0]), get(&items[1])),
        other => (get(other), get(other)),
    };
    match (a, b) {
        (Some(a), Some(b)) if a <= b => Ok((a, b)),
        (Some(a), Some(b)) => Err(format!("{field}: [{a}, {b}]: min is greater than max")),
        _ => Err(format!(
            "{field}: expected [min, max] or a number, got {value}"
        )),
    }
}

impl NemesisSpec {
    /// Validates the scenario's `nemesis` object against its node names.
    pub fn from_json(
        value: &Value,
        nodes: &BTreeSet<String>,
        duration_ms: u64,
    ) -> Result<NemesisSpec, String> {
        let Value::Object(map) = value else {
            return Err(format!(
                "nemesis: expected an object of fault kinds, got {value}"
            ));
        };
        let mut spec = NemesisSpec {
            kinds: Vec::new(),
            heal_at_ms: None,
            swarm: true,
        };
        for (key, v) in map {
            let field = format!("nemesis.{key}");
            match key.as_str() {
                "heal_at_ms" => {
                    let at = v
                        .as_u64()
                        .ok_or_else(|| format!("{field}: expected ms ≥ 0, got {v}"))?;
                    if at >= duration_ms {
                        return Err(format!(
                            "{field}: {at} is not before the end of the run ({duration_ms} ms)"
                        ));
                    }
                    spec.heal_at_ms = Some(at);
                }
                "swarm" => {
                    spec.swarm = v
                        .as_bool()
                        .ok_or_else(|| format!("{field}: expected true or false, got {v}"))?;
                }
                kind if KINDS.contains(&kind) => {
                    let spec_of_kind = KindSpec::from_json(kind, v, &field, nodes)?;
                    spec_of_kind.check_link_changes(&field, nodes.len(), duration_ms)?;
                    spec.kinds.push(spec_of_kind);
                }
                other => {
                    return Err(format!(
                        "nemesis.{other}: unknown field (fault kinds: {}; or heal_at_ms, swarm)",
                        KINDS.join(", ")
                    ));
                }
            }
        }
        if spec.kinds.is_empty() {
            return Err("nemesis: lists no fault kind".into());
        }
        spec.kinds
            .sort_by_key(|k| KINDS.iter().position(|n| *n == k.kind));
        Ok(spec)
    }
}

impl KindSpec {
    fn from_json(
        kind: &str,
        value: &Value,
        field: &str,
        nodes: &BTreeSet<String>,
    ) -> Result<KindSpec, String> {
        let Value::Object(map) = value else {
            return Err(format!("{field}: expected an object, got {value}"));
        };
        let (allowed, required) = kind_fields(kind);
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                return Err(format!(
                    "{field}.{key}: not a field of the {kind} nemesis (it takes: {})",
                    allowed.join(", ")
                ));
            }
        }
        let every_ms = ms_range(
            map.get("every_ms").ok_or_else(|| {
                format!("{field}.every_ms: missing ([min, max] ms between faults)")
            })?,
            &format!("{field}.every_ms"),
        )?;
        if every_ms.min < MIN_NEMESIS_EVERY_MS {
            return Err(format!(
                "{field}.every_ms: faults {} ms apart are too frequent (limit: at least {MIN_NEMESIS_EVERY_MS} ms)",
                every_ms.min
            ));
        }
        let duration_ms = match map.get("duration_ms") {
            Some(v) => Some(ms_range(v, &format!("{field}.duration_ms"))?),
            None => None,
        };
        if required.contains(&"duration_ms") && duration_ms.is_none() {
            return Err(format!(
                "{field}.duration_ms: missing ([min, max] ms each fault lasts{})",
                if matches!(kind, "crash" | "power_loss") {
                    "; the time until the restart"
                } else {
                    ""
                }
            ));
        }
        let nodes_list: Vec<String> = match map.get("nodes") {
            None => default_nodes(kind, nodes),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let name = item
                        .as_str()
                        .ok_or_else(|| format!("{field}.nodes[{i}]: expected a node name"))?;
                    if let Some(group) = group_nodes(name, nodes) {
                        out.extend(group);
                        continue;
                    }
                    if placeholder::is_placeholder(name) {
                        // The nemesis draws among node names when the run starts: nothing has
                        // fired, so there is no holder nor anything left over to stand for.
                        return Err(format!(
                            "{field}.nodes[{i}]: {name} is not a placeholder of the nemesis (it takes {{masters}} and {{clients}}; the others are for scripted faults)"
                        ));
                    }
                    if !nodes.contains(name) {
                        return Err(format!(
                            "{field}.nodes[{i}]: no node \"{name}\" in this scenario"
                        ));
                    }
                    if matches!(kind, "crash" | "power_loss") && name == "resource" {
                        return Err(format!(
                            "{field}.nodes[{i}]: the protected resource does not {}",
                            if kind == "crash" {
                                "crash"
                            } else {
                                "lose power"
                            }
                        ));
                    }
                    if kind == "failover" && !is_master_name(name) {
                        return Err(format!(
                            "{field}.nodes[{i}]: \"{name}\" is not a master group (redis-N)"
                        ));
                    }
                    out.push(name.to_string());
                }
                out
            }
            Some(other) => return Err(format!("{field}.nodes: expected a list, got {other}")),
        };
        let min_nodes = if matches!(kind, "partition" | "delay") {
            2
        } else {
            1
        };
        if nodes_list.len() < min_nodes {
            return Err(format!(
                "{field}.nodes: a {kind} nemesis needs at least {min_nodes} node(s)"
            ));
        }
        if kind == "failover" && !nodes.contains("sentinel-1") {
            return Err(format!(
                "{field}: a failover needs Sentinels (topology.sentinels)"
            ));
        }
        let delta_ms = match (kind, map.get("delta_ms")) {
            ("clock_jump", Some(v)) => Some(pair(v, &format!("{field}.delta_ms"), Value::as_i64)?),
            ("clock_jump", None) => {
                return Err(format!("{field}.delta_ms: missing ([min, max] ms, ±)"));
            }
            _ => None,
        };
        let rate = match (kind, map.get("rate")) {
            ("clock_drift", Some(v)) => {
                let r = pair(v, &format!("{field}.rate"), Value::as_f64)?;
                if !(r.0 > 0.0 && r.1 <= 100.0) {
                    return Err(format!("{field}.rate: must be in (0, 100]"));
                }
                Some(r)
            }
            ("clock_drift", None) => return Err(format!("{field}.rate: missing ([min, max])")),
            _ => None,
        };
        let extra_ms = match (kind, map.get("extra_ms")) {
            ("delay", Some(v)) => Some(ms_range(v, &format!("{field}.extra_ms"))?),
            ("delay", None) => return Err(format!("{field}.extra_ms: missing ([min, max] ms)")),
            _ => None,
        };
        Ok(KindSpec {
            kind: kind.to_string(),
            every_ms,
            duration_ms,
            nodes: nodes_list,
            delta_ms,
            rate,
            extra_ms,
        })
    }
}

impl KindSpec {
    /// A partition of the kind's n nodes cuts up to n²/2 links and an isolation 2(N−1) of the
    /// scenario's N nodes, each healed again: with a fault every `every_ms.min` for the whole
    /// run, the total must stay within [`MAX_LINK_CHANGES`].
    fn check_link_changes(
        &self,
        field: &str,
        all_nodes: usize,
        duration_ms: u64,
    ) -> Result<(), String> {
        let per_fault = match self.kind.as_str() {
            "partition" => (self.nodes.len() as u64).pow(2),
            "isolate" => 4 * (all_nodes as u64).saturating_sub(1),
            _ => return Ok(()),
        };
        let faults = duration_ms / self.every_ms.min + 1;
        let changes = faults.saturating_mul(per_fault);
        if changes > MAX_LINK_CHANGES {
            return Err(format!(
                "{field}: up to {faults} faults, each cutting and healing up to {per_fault} links of its {} nodes, are {changes} link changes (limit {MAX_LINK_CHANGES}); list fewer nodes or raise every_ms",
                if self.kind == "isolate" {
                    all_nodes
                } else {
                    self.nodes.len()
                }
            ));
        }
        Ok(())
    }
}

/// The fields one kind's nemesis takes, and those it requires (validation and the scenario
/// JSON Schema both ask here).
pub fn kind_fields(kind: &str) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut allowed = vec!["every_ms", "nodes"];
    let mut required = vec!["every_ms"];
    match kind {
        "clock_jump" => {
            allowed.extend(["delta_ms", "duration_ms"]);
            required.push("delta_ms");
        }
        "clock_drift" => {
            allowed.extend(["rate", "duration_ms"]);
            required.extend(["rate", "duration_ms"]);
        }
        "delay" => {
            allowed.extend(["extra_ms", "duration_ms"]);
            required.extend(["extra_ms", "duration_ms"]);
        }
        "drop_connections" | "failover" => {}
        _ => {
            allowed.push("duration_ms");
            required.push("duration_ms");
        }
    }
    (allowed, required)
}

/// The group names a `nodes` list may hold (`group_nodes`).
pub const NODE_GROUPS: &[&str] = &["{masters}", "{clients}"];

/// `{masters}` (every master) and `{clients}` (every client) in a `nodes` list: the same file
/// then fits every scheme row, whichever number of masters it has.
fn group_nodes(name: &str, nodes: &BTreeSet<String>) -> Option<Vec<String>> {
    let keep: fn(&str) -> bool = match name {
        "{masters}" => is_master_name,
        "{clients}" => |n| n.starts_with("client-"),
        _ => return None,
    };
    Some(nodes.iter().filter(|n| keep(n)).cloned().collect())
}

/// Who a kind picks from when the scenario does not say: crashes (of a process or a machine) and dropped connections hit
/// Redis and Sentinel processes, failovers master groups, everything else any node but the
/// resource (which stands for durable storage).
fn default_nodes(kind: &str, nodes: &BTreeSet<String>) -> Vec<String> {
    let servers = |n: &&String| n.starts_with("redis-") || n.starts_with("sentinel-");
    match kind {
        "crash" | "power_loss" | "drop_connections" => {
            nodes.iter().filter(servers).cloned().collect()
        }
        "failover" => nodes
            .iter()
            .filter(|n| is_master_name(n))
            .cloned()
            .collect(),
        _ => nodes.iter().filter(|n| *n != "resource").cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> BTreeSet<String> {
        ["redis-1", "redis-2", "client-1", "client-2", "resource"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn a_nemesis_validates_with_defaults() {
        let v = serde_json::json!({
            "pause": { "every_ms": [2000, 8000], "duration_ms": [100, 3000], "nodes": ["client-1"] },
            "crash": { "every_ms": [5000, 9000], "duration_ms": [0, 100] },
            "heal_at_ms": 20000
        });
        let spec = NemesisSpec::from_json(&v, &nodes(), 30_000).unwrap();
        assert_eq!(spec.kinds[0].kind, "pause");
        assert_eq!(spec.kinds[1].nodes, vec!["redis-1", "redis-2"]);
        assert_eq!(spec.heal_at_ms, Some(20_000));
        assert!(spec.swarm);
    }

    #[test]
    fn bad_nemeses_name_the_field() {
        let err = |v: Value| NemesisSpec::from_json(&v, &nodes(), 30_000).unwrap_err();
        assert!(err(serde_json::json!({"paws": {}})).starts_with("nemesis.paws: unknown field"));
        assert_eq!(
            err(serde_json::json!({"pause": {"every_ms": [100, 200]}})),
            "nemesis.pause.duration_ms: missing ([min, max] ms each fault lasts)"
        );
        assert!(
            err(
                serde_json::json!({"pause": {"every_ms": [100, 200], "duration_ms": 5, "nodes": ["x"]}})
            )
            .starts_with("nemesis.pause.nodes[0]: no node \"x\"")
        );
        assert!(
            err(serde_json::json!({"clock_jump": {"every_ms": 500}}))
                .starts_with("nemesis.clock_jump.delta_ms: missing")
        );
        assert!(
            err(serde_json::json!({"failover": {"every_ms": 500}})).contains("needs Sentinels")
        );
        assert_eq!(
            err(serde_json::json!({"failover": {"every_ms": [1, 1]}})),
            "nemesis.failover.every_ms: faults 1 ms apart are too frequent (limit: at least 10 ms)"
        );
    }

    #[test]
    fn node_groups_fit_every_row() {
        let v = serde_json::json!({
            "delay": { "every_ms": 10, "duration_ms": 5, "extra_ms": 5,
                       "nodes": ["{clients}", "resource", "{masters}"] }
        });
        let spec = NemesisSpec::from_json(&v, &nodes(), 30_000).unwrap();
        assert_eq!(
            spec.kinds[0].nodes,
            vec!["client-1", "client-2", "resource", "redis-1", "redis-2"]
        );
    }
}
