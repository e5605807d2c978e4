//! `locksim check --record`: writes the verdicts a check observed into its `"schemes": "all"`
//! scenario files as per-row expectations, so that `check` guards every cell of the matrix
//! from then on. Recorded by hand, ~25 rows × 20 columns would be error-prone; recorded blindly,
//! they would guard whatever the simulator does — so the result is meant to be read (`git
//! diff`) against the literature before it is committed, and the cells the literature settles
//! are asserted in `sim/tests/matrix.rs`.
//!
//! Per row and property (mutual exclusion, resource safety, liveness): the same verdict on
//! every seed becomes `expect_by_scheme`; a verdict that differs between seeds becomes
//! `expect_some_by_scheme` with the failing value (some seed breaks it) and nothing in
//! `expect`, never a flaky `expect`. A property the row's `unasserted_by_scheme` names (with
//! why it is deliberately not asserted) is written in neither. Only those two fields of the
//! file are rewritten; the rest, `unasserted_by_scheme` included, stays byte for byte.

use std::collections::BTreeMap;

use model::result::{Liveness, RunResult, Safety};

use crate::scenario::Scenario;
use crate::scenario::expect::Unasserted;

/// One row's recorded expectations, as JSON object bodies (`"liveness": "ok"`).
#[derive(Default, PartialEq, Debug)]
pub struct Recorded {
    pub every: Vec<(&'static str, &'static str)>,
    pub some: Vec<(&'static str, &'static str)>,
}

impl Recorded {
    /// These, without the properties `unasserted` names.
    pub fn without(mut self, unasserted: &Unasserted) -> Recorded {
        self.every
            .retain(|(property, _)| !unasserted.names(property));
        self.some
            .retain(|(property, _)| !unasserted.names(property));
        self
    }
}

/// A recorded property: its name, its verdict in one run, its failing value.
type Property = (&'static str, fn(&RunResult) -> &'static str, &'static str);

/// What one row's runs say: each property either the same on every seed or, when it differs,
/// its failing value on some seed.
pub fn observe(results: &[RunResult]) -> Recorded {
    let mut recorded = Recorded::default();
    let properties: [Property; 3] = [
        (
            "mutual_exclusion",
            |r| r.verdicts.mutual_exclusion.as_str(),
            Safety::Violated.as_str(),
        ),
        (
            "resource_safety",
            |r| r.verdicts.resource_safety.as_str(),
            Safety::Violated.as_str(),
        ),
        (
            "liveness",
            |r| r.verdicts.liveness.as_str(),
            Liveness::Stuck.as_str(),
        ),
    ];
    for (property, verdict, failing) in properties {
        let Some(first) = results.first().map(verdict) else {
            continue;
        };
        if results.iter().all(|r| verdict(r) == first) {
            recorded.every.push((property, first));
        } else {
            recorded.some.push((property, failing));
        }
    }
    recorded
}

fn object(pairs: &[(&str, &str)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("\"{k}\": \"{v}\""))
        .collect();
    format!("{{ {} }}", body.join(", "))
}

/// The new text of a scenario file: its `expect_by_scheme` / `expect_some_by_scheme` replaced
/// by `rows` (label → recorded, in row order); everything else kept as it was.
pub fn rewrite(text: &str, rows: &[(String, Recorded)]) -> Result<String, String> {
    let spans = top_level_members(text)?;
    let mut kept = text.to_string();
    // Remove the old members, last first so the earlier offsets stay valid.
    for (key, start, end) in spans.iter().rev() {
        if key == "expect_by_scheme" || key == "expect_some_by_scheme" {
            kept.replace_range(*start..*end, "");
        }
    }
    let close = kept
        .rfind('}')
        .ok_or("not a JSON object (no closing brace)")?;
    let body = kept[..close].trim_end().to_string();
    let section = |name: &str, pick: fn(&Recorded) -> &Vec<(&'static str, &'static str)>| {
        let lines: Vec<String> = rows
            .iter()
            .filter(|(_, r)| !pick(r).is_empty())
            .map(|(label, r)| format!("    \"{label}\": {}", object(pick(r))))
            .collect();
        (!lines.is_empty()).then(|| format!("  \"{name}\": {{\n{}\n  }}", lines.join(",\n")))
    };
    let sections: Vec<String> = [
        section("expect_by_scheme", |r| &r.every),
        section("expect_some_by_scheme", |r| &r.some),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut out = body;
    if !sections.is_empty() {
        out.push_str(",\n");
        out.push_str(&sections.join(",\n"));
    }
    out.push_str("\n}\n");
    Ok(out)
}

/// The top-level members of a JSON object: (key, start, end) byte spans covering each member
/// with the comma that separates it from the one before (or, for the first, after it).
fn top_level_members(text: &str) -> Result<Vec<(String, usize, usize)>, String> {
    let bytes = text.as_bytes();
    let mut members = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    // (key, start of the key or of the comma before it)
    let mut current: Option<(String, usize)> = None;
    let mut last_separator: Option<usize> = None;
    let mut expect_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && expect_key {
                    let key = text[start + 1..i].to_string();
                    let from = last_separator.unwrap_or(start);
                    current = Some((key, from));
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth == 1 {
                    expect_key = true;
                }
            }
            b'}' | b']' => {
                if depth == 1
                    && let Some((key, from)) = current.take()
                {
                    members.push((key, from, i));
                }
                depth = depth.checked_sub(1).ok_or("unbalanced brackets")?;
            }
            b',' if depth == 1 => {
                if let Some((key, from)) = current.take() {
                    members.push((key, from, i));
                }
                last_separator = Some(i);
                expect_key = true;
            }
            _ => {}
        }
        i += 1;
    }
    // The first member has no comma before it: it takes the one after it, and the blank up to
    // the next key.
    if members.len() > 1
        && let Some(first) = members.first_mut()
    {
        let rest = &text[first.2 + 1..];
        first.2 += 1 + (rest.len() - rest.trim_start().len());
    }
    Ok(members)
}

/// Writes the observed verdicts of every `"schemes": "all"` scenario that ran its whole seed
/// range into its file; returns one line per file written. `results` are by (scenario index,
/// scheme index).
pub fn record(
    scenarios: &[std::sync::Arc<Scenario>],
    results: &BTreeMap<(usize, usize), Vec<RunResult>>,
) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (si, scenario) in scenarios.iter().enumerate() {
        if !scenario.all_schemes {
            continue;
        }
        let none = crate::scenario::expect::Expect::default();
        if scenario.expect != none || scenario.expect_some != none {
            return Err(format!(
                "{}: --record writes per-scheme expectations (expect_by_scheme) only: move its expect / expect_some there first",
                scenario.path
            ));
        }
        let mut rows = Vec::new();
        for (k, spec) in scenario.schemes.iter().enumerate() {
            let rs = results.get(&(si, k)).map_or(&[][..], Vec::as_slice);
            if rs.len() as u64 != scenario.seeds.len() {
                return Err(format!(
                    "{}: {} ran {} of its {} seeds: record only a whole, uninterrupted check",
                    scenario.path,
                    spec.label(),
                    rs.len(),
                    scenario.seeds.len()
                ));
            }
            rows.push((spec.label(), observe(rs).without(&scenario.unasserted(k))));
        }
        let text = std::fs::read_to_string(&scenario.path)
            .map_err(|e| format!("{}: cannot read: {e}", scenario.path))?;
        let new = rewrite(&text, &rows).map_err(|e| format!("{}: {e}", scenario.path))?;
        // What was written must load and mean what was observed.
        Scenario::parse(&new, &scenario.path)?;
        if new != text {
            std::fs::write(&scenario.path, &new)
                .map_err(|e| format!("{}: cannot write: {e}", scenario.path))?;
            written.push(format!(
                "recorded {} rows of {} ({})",
                rows.len(),
                scenario.name,
                scenario.path
            ));
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{
  "name": "m",
  "schemes": "all",
  "expect_by_scheme": {
    "set": { "liveness": "ok" }
  },
  "seeds": "0..1"
}
"#;

    /// A run of `m` with these verdicts (resource safety holds).
    fn run(seed: u64, me: Safety, live: Liveness) -> RunResult {
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
                "scenario": "m", "scheme": "x", "seed": seed, "trace_hash": "", "sim_ms": 1,
                "wall_ms": 1,
                "verdicts": { "mutual_exclusion": "holds", "resource_safety": "holds", "liveness": "ok" },
                "counts": { "acquisitions": 1, "acquire_failures": 0, "lock_overlaps": 0,
                            "resource_conflicts": 0, "stale_writes_rejected": 0,
                            "foreign_releases": 0, "faults_injected": 0 },
                "latency_ms": { "acquire": { "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0 },
                                "release": { "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0 } },
                "throughput_per_s": 1.0, "violations": []
            }))
            .unwrap();
        r.verdicts.mutual_exclusion = me;
        r.verdicts.liveness = live;
        r
    }

    /// A verdict shared by every seed is expected on every seed; one that differs is expected
    /// failing on some seed, never on all.
    #[test]
    fn varying_verdicts_become_expect_some() {
        let recorded = observe(&[
            run(0, Safety::Violated, Liveness::Ok),
            run(1, Safety::Holds, Liveness::Ok),
        ]);
        assert_eq!(
            recorded,
            Recorded {
                every: vec![("resource_safety", "holds"), ("liveness", "ok")],
                some: vec![("mutual_exclusion", "violated")],
            }
        );
    }

    #[test]
    fn only_the_two_fields_are_rewritten() {
        let rows = vec![
            (
                "set".to_string(),
                Recorded {
                    every: vec![("mutual_exclusion", "violated")],
                    some: vec![],
                },
            ),
            (
                "fencing".to_string(),
                Recorded {
                    every: vec![("liveness", "ok")],
                    some: vec![("mutual_exclusion", "violated")],
                },
            ),
        ];
        let out = rewrite(FILE, &rows).unwrap();
        assert_eq!(
            out,
            r#"{
  "name": "m",
  "schemes": "all",
  "seeds": "0..1",
  "expect_by_scheme": {
    "set": { "mutual_exclusion": "violated" },
    "fencing": { "liveness": "ok" }
  },
  "expect_some_by_scheme": {
    "fencing": { "mutual_exclusion": "violated" }
  }
}
"#
        );
        assert_eq!(
            rewrite(&out, &rows).unwrap(),
            out,
            "recording twice changes nothing"
        );
        let first = "{\n  \"expect_by_scheme\": {},\n  \"name\": \"m\"\n}\n";
        assert_eq!(
            rewrite(first, &[]).unwrap(),
            "{\n  \"name\": \"m\"\n}\n",
            "a first member goes with the comma after it"
        );
    }

    /// A property `unasserted_by_scheme` names is recorded neither in `expect_by_scheme` nor
    /// in `expect_some_by_scheme`, whatever the seeds gave, and its reason stays in the file;
    /// `check` then judges the row without it.
    #[test]
    fn record_keeps_an_unasserted_property_unasserted() {
        let dir = std::env::temp_dir().join(format!("locksim-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.json");
        let reason = "violated on a rare seed outside 0..1";
        let text = format!(
            r#"{{
  "name": "m",
  "schemes": "all",
  "seeds": "0..1",
  "unasserted_by_scheme": {{
    "set": {{ "mutual_exclusion": "{reason}" }}
  }}
}}
"#
        );
        std::fs::write(&path, &text).unwrap();
        let scenario = std::sync::Arc::new(Scenario::load(&path).unwrap());
        // Every row holds on both seeds: recorded blindly, "set" would expect "holds".
        let results: BTreeMap<(usize, usize), Vec<RunResult>> = (0..scenario.schemes.len())
            .map(|k| {
                let rs = (0..2).map(|seed| run(seed, Safety::Holds, Liveness::Ok));
                ((0, k), rs.collect())
            })
            .collect();
        record(std::slice::from_ref(&scenario), &results).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let value: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert_eq!(
            value["unasserted_by_scheme"]["set"]["mutual_exclusion"], reason,
            "{written}"
        );
        assert_eq!(
            value["expect_by_scheme"]["set"],
            serde_json::json!({ "resource_safety": "holds", "liveness": "ok" }),
            "{written}"
        );
        assert_eq!(
            value["expect_by_scheme"]["setex"]["mutual_exclusion"], "holds",
            "other rows are recorded in full: {written}"
        );
        let reloaded = Scenario::parse(&written, "m.json").unwrap();
        let set = reloaded
            .schemes
            .iter()
            .position(|s| s.label() == "set")
            .unwrap();
        let (expect, expect_some) = reloaded.expectations(set);
        assert_eq!(expect.mutual_exclusion, None);
        assert_eq!(expect_some.mutual_exclusion, None);
        let violated = [run(0, Safety::Violated, Liveness::Ok)];
        assert!(
            crate::scenario::expect::mismatches(&expect, &expect_some, &violated).is_empty(),
            "check does not judge an unasserted property"
        );
    }
}
