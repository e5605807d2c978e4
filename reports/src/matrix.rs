//! The fault matrix at the head of the report, as data: a row per scheme (grouped by family), a
//! column per fault class (the `"schemes": "all"` scenarios, grouped by fault family), each cell
//! the seeds that broke something out of the seeds run — for a random-rate column the share of
//! seeds with its 95% Wilson interval — and what breaks each row, in words. The HTML
//! (`html::fault_matrix`) and the Markdown below render it.

use std::fmt::Write;

use crate::summary::{Cell, Outcome, ScenarioInfo, Summary, fmt_ms};

/// The family of the fault-free columns: the cost columns and charts come from them.
pub const BASELINE_FAMILY: &str = "baseline";

/// An anchor id for a cell (`#cell-<scenario>--<scheme>`), for links from other sections.
pub fn cell_id(scenario: &str, scheme: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    };
    format!("cell-{}--{}", clean(scenario), clean(scheme))
}

/// A share as the report writes it, in whole percent (`35%`).
pub fn percent(share: f64) -> String {
    format!("{}%", (share * 100.0).round() as u64)
}

/// A cell's figure: `7/10`, or for a random-rate column `35%` with its interval.
pub fn figure(cell: &Cell, random: bool) -> (String, Option<String>) {
    let s = &cell.stats;
    if s.seeds_run == 0 {
        return ("no runs".into(), None);
    }
    if random {
        let pct = |x: f64| (x * 100.0).round() as u64;
        (
            percent(s.violating_share()),
            Some(format!(
                "{}–{}",
                pct(s.violating_ci95[0]),
                pct(s.violating_ci95[1])
            )),
        )
    } else {
        (format!("{}/{}", s.seeds_violating, s.seeds_run), None)
    }
}

/// One letter per outcome, for text where colour is not available.
pub fn outcome_letter(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Unfair => "F",
        Outcome::Stuck => "S",
        Outcome::Overlap => "X",
        Outcome::Corrupted => "C",
        Outcome::NoRuns => "—",
    }
}

/// The columns grouped by family, in report order: (family, its columns).
pub fn families<'a>(columns: &[&'a ScenarioInfo]) -> Vec<(String, Vec<&'a ScenarioInfo>)> {
    let mut groups: Vec<(String, Vec<&ScenarioInfo>)> = Vec::new();
    for &col in columns {
        let family = col.matrix.as_ref().map_or("", |m| m.family.as_str());
        match groups.iter_mut().find(|(f, _)| f == family) {
            Some((_, cols)) => cols.push(col),
            None => groups.push((family.to_string(), vec![col])),
        }
    }
    groups
}

/// The columns in display order (grouped by family, first appearance first).
pub fn ordered_columns(s: &Summary) -> Vec<&ScenarioInfo> {
    families(&s.matrix_columns())
        .into_iter()
        .flat_map(|(_, cols)| cols)
        .collect()
}

/// A random nemesis drives the column: its cells are rates over the seeds.
pub fn is_random(col: &ScenarioInfo) -> bool {
    col.matrix.as_ref().is_some_and(|m| m.random)
}

/// A column's short header (its name when it has none).
pub fn short(col: &ScenarioInfo) -> &str {
    col.matrix
        .as_ref()
        .map_or(col.name.as_str(), |m| m.column.as_str())
}

/// The column's family.
pub fn family(col: &ScenarioInfo) -> &str {
    col.matrix.as_ref().map_or("", |m| m.family.as_str())
}

/// The fault-free columns, in report order.
pub fn baselines(s: &Summary) -> Vec<&ScenarioInfo> {
    s.matrix_columns()
        .into_iter()
        .filter(|c| family(c) == BASELINE_FAMILY)
        .collect()
}

/// The cost columns: the fault-free column with a single client (what a lock costs when nobody
/// else wants it) and the one with the most clients (contention: throughput and waits).
pub struct Cost<'a> {
    pub uncontended: Option<&'a ScenarioInfo>,
    pub contended: Option<&'a ScenarioInfo>,
}

pub fn cost_columns(s: &Summary) -> Cost<'_> {
    let base = baselines(s);
    Cost {
        uncontended: base.iter().copied().find(|c| c.clients == 1),
        contended: base
            .iter()
            .copied()
            .filter(|c| c.clients > 1)
            .max_by_key(|c| c.clients),
    }
}

/// The fault-free column whose breakage means "breaks with no fault at all": the contended one.
fn unfaulted(s: &Summary) -> Option<&ScenarioInfo> {
    let cost = cost_columns(s);
    cost.contended.or(cost.uncontended)
}

/// The outcome as the "what breaks it" sentences say it.
pub fn outcome_words(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Corrupted => "lost updates",
        Outcome::Overlap => "two holders (no update lost)",
        Outcome::Stuck => "stuck",
        Outcome::Unfair => "FIFO order lost",
        Outcome::Ok | Outcome::NoRuns => "",
    }
}

/// The outcomes that break something, worst first.
pub const BREAKING: [Outcome; 4] = [
    Outcome::Corrupted,
    Outcome::Overlap,
    Outcome::Stuck,
    Outcome::Unfair,
];

/// What breaks one row among `columns`, counting only the outcomes in `counted`: its failing
/// worst-case columns grouped by outcome (worst first), then its random-rate columns with a
/// non-zero rate of a counted outcome. A row that breaks in a fault-free column says so first.
/// Empty: nothing here breaks it.
pub fn breaks_among(
    s: &Summary,
    scheme: &str,
    columns: &[&ScenarioInfo],
    counted: &[Outcome],
) -> Vec<String> {
    let outcome_in = |c: &ScenarioInfo| {
        s.cell(&c.name, scheme)
            .map(|cell| cell.stats.outcome)
            .filter(|o| counted.contains(o))
    };
    let base = unfaulted(s).filter(|b| columns.iter().any(|c| c.name == b.name));
    let unfaulted = base.and_then(&outcome_in);
    let mut parts = Vec::new();
    if let Some(outcome) = unfaulted {
        parts.push(format!("{} with no fault at all", outcome_words(outcome)));
    }
    for outcome in BREAKING {
        if unfaulted == Some(outcome) || !counted.contains(&outcome) {
            continue;
        }
        let names: Vec<&str> = columns
            .iter()
            .filter(|c| !is_random(c) && outcome_in(c) == Some(outcome))
            .filter(|c| Some(c.name.as_str()) != base.map(|b| b.name.as_str()))
            .map(|c| short(c))
            .collect();
        if !names.is_empty() {
            parts.push(format!(
                "{} under {}",
                outcome_words(outcome),
                names.join(" · ")
            ));
        }
    }
    let random: Vec<String> = columns
        .iter()
        .filter(|c| is_random(c) && outcome_in(c).is_some())
        .filter_map(|c| {
            let cell = s.cell(&c.name, scheme)?;
            (cell.stats.seeds_violating > 0)
                .then(|| format!("{} {}", short(c), percent(cell.stats.violating_share())))
        })
        .collect();
    if !random.is_empty() {
        parts.push(format!("random faults: {}", random.join(" · ")));
    }
    parts
}

/// What breaks one row anywhere in the matrix, as one sentence.
pub fn breaks(s: &Summary, scheme: &str) -> String {
    let parts = breaks_among(s, scheme, &ordered_columns(s), &BREAKING);
    if parts.is_empty() {
        "nothing in this matrix breaks it".into()
    } else {
        parts.join("; ")
    }
}

/// A row's cost from the cost columns: (uncontended acquire p50 and p99, contended
/// acquisitions per second), each when its column ran the row.
pub fn cost(s: &Summary, scheme: &str) -> (Option<(f64, f64)>, Option<f64>) {
    let cost = cost_columns(s);
    let cell = |c: Option<&ScenarioInfo>| {
        c.and_then(|c| s.cell(&c.name, scheme))
            .filter(|cell| cell.stats.acquire_ms.runs > 0)
    };
    (
        cell(cost.uncontended).map(|c| (c.stats.acquire_ms.p50, c.stats.acquire_ms.p99)),
        cell(cost.contended).map(|c| c.stats.throughput_per_s),
    )
}

/// The cost columns' headers: (uncontended, contended), with the client count.
pub fn cost_headers(s: &Summary) -> (Option<String>, Option<String>) {
    let cost = cost_columns(s);
    (
        cost.uncontended
            .map(|_| "1 client: p50 / p99 ms".to_string()),
        cost.contended
            .map(|c| format!("{} clients: acq/s", c.clients)),
    )
}

/// The fault matrix as a Markdown table (a letter per outcome), then "what breaks it".
pub fn markdown(s: &Summary, out: &mut String) {
    let columns = ordered_columns(s);
    if columns.is_empty() {
        return;
    }
    let (uncontended, contended) = cost_headers(s);
    let _ = writeln!(
        out,
        "Cells: seeds that broke something / seeds run (random-rate columns, marked ~: the share of seeds, with its 95% Wilson interval), then the worst outcome: C lost update, X held twice but the resource stayed safe, S stuck, F FIFO order lost, ok. Linked: the first failing seed's timeline.\n"
    );
    let mut header = "| scheme |".to_string();
    let mut rule = "|---|".to_string();
    for col in &columns {
        let mark = if is_random(col) { "~" } else { "" };
        let _ = write!(header, " {mark}{} |", short(col).replace('|', "\\|"));
        rule.push_str("---|");
    }
    for h in [&uncontended, &contended].into_iter().flatten() {
        let _ = write!(header, " {h} |");
        rule.push_str("--:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for row in &s.matrix_rows {
        let lease = if row.lease { "" } else { " (no lease)" };
        let _ = write!(out, "| {}{lease} |", row.scheme);
        for col in &columns {
            let text = match s.cell(&col.name, &row.scheme) {
                Some(cell) => {
                    let (big, small) = figure(cell, is_random(col));
                    let figure = match small {
                        Some(ci) => format!("{big} [{ci}]"),
                        None => big,
                    };
                    let letter = outcome_letter(cell.stats.outcome);
                    let text = format!("{figure} {letter}");
                    match &cell.timeline {
                        Some(link) => format!("[{text}]({link})"),
                        None => text,
                    }
                }
                None => "—".into(),
            };
            let _ = write!(out, " {text} |");
        }
        let (lat, thr) = cost(s, &row.scheme);
        if uncontended.is_some() {
            let _ = write!(
                out,
                " {} |",
                lat.map_or("—".into(), |(p50, p99)| format!(
                    "{} / {}",
                    fmt_ms(p50),
                    fmt_ms(p99)
                ))
            );
        }
        if contended.is_some() {
            let _ = write!(out, " {} |", thr.map_or("—".into(), |t| format!("{t:.1}")));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "\n### What breaks it\n");
    for row in &s.matrix_rows {
        let _ = writeln!(out, "- **{}**: {}", row.scheme, breaks(s, &row.scheme));
    }
    out.push('\n');
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::summary::tests::{BAD, FENCED, OK, result};
    use crate::summary::{Cell, CellStats, MatrixColumn, MatrixRow};

    pub fn column(name: &str, column: &str, family: &str, random: bool) -> ScenarioInfo {
        ScenarioInfo {
            name: name.into(),
            file: format!("scenarios/matrix/{name}.json"),
            description: format!("{column}, in full"),
            source: String::new(),
            seeds: "0..3".into(),
            clients: 2,
            incident: None,
            matrix: Some(MatrixColumn {
                column: column.into(),
                family: family.into(),
                random,
            }),
        }
    }

    type Verdicts = (
        model::result::Safety,
        model::result::Safety,
        model::result::Liveness,
    );

    pub fn cell(scenario: &str, scheme: &str, verdicts: &[(Verdicts, u64)]) -> Cell {
        let results: Vec<_> = verdicts
            .iter()
            .map(|(v, seed)| result(scenario, scheme, *seed, *v, (2.0, 9.0)))
            .collect();
        Cell {
            stats: CellStats::from_results(scenario, scheme, &results),
            mismatches: vec![],
            timeline: None,
            replay: None,
            expect_broken_seeds: None,
        }
    }

    /// Two rows (one without a lease) × a one-client and a contended fault-free column, a
    /// worst case and a random rate.
    pub fn sample() -> Summary {
        let mut s = crate::html::tests::sample();
        let mut one = column("m-one", "one client", BASELINE_FAMILY, false);
        one.clients = 1;
        s.scenarios = vec![
            one,
            column("m-none", "no faults", BASELINE_FAMILY, false),
            column("m-pause", "GC pause", "pauses", false),
            column("m-rand", "random pauses", "pauses", true),
        ];
        s.matrix_rows = vec![
            MatrixRow {
                scheme: "setnx-del".into(),
                family: "SETNX".into(),
                lease: false,
            },
            MatrixRow {
                scheme: "fencing".into(),
                family: "fencing tokens".into(),
                lease: true,
            },
        ];
        s.schemes = vec!["setnx-del".into(), "fencing".into()];
        s.cells = vec![
            cell("m-one", "setnx-del", &[(OK, 0), (OK, 1)]),
            cell("m-none", "setnx-del", &[(OK, 0), (OK, 1)]),
            cell("m-pause", "setnx-del", &[(OK, 0), (OK, 1)]),
            cell("m-rand", "setnx-del", &[(OK, 0), (OK, 1), (OK, 2), (OK, 3)]),
            cell("m-one", "fencing", &[(OK, 0), (OK, 1)]),
            cell("m-none", "fencing", &[(OK, 0), (OK, 1)]),
            cell("m-pause", "fencing", &[(FENCED, 0), (FENCED, 1)]),
            cell("m-rand", "fencing", &[(BAD, 0), (OK, 1), (OK, 2), (OK, 3)]),
        ];
        s
    }

    #[test]
    fn what_breaks_a_row_and_what_it_costs() {
        let s = sample();
        assert_eq!(
            breaks(&s, "fencing"),
            "two holders (no update lost) under GC pause; random faults: random pauses 25%"
        );
        assert_eq!(breaks(&s, "setnx-del"), "nothing in this matrix breaks it");
        // Only lost updates counted: the overlap under the pause does not break it.
        let cols = ordered_columns(&s);
        assert_eq!(
            breaks_among(&s, "fencing", &cols, &[Outcome::Corrupted]),
            ["random faults: random pauses 25%"]
        );
        assert_eq!(cost(&s, "fencing"), (Some((2.0, 9.0)), Some(10.0)));
        let mut md = String::new();
        markdown(&s, &mut md);
        assert!(
            md.contains("| fencing | 0/2 ok | 0/2 ok | 2/2 X | 25% [5–70] C | 2.0 / 9.0 | 10.0 |"),
            "{md}"
        );
        assert!(md.contains("| setnx-del (no lease) |"));
        assert!(md.contains("1 client: p50 / p99 ms | 2 clients: acq/s |"));
    }

    #[test]
    fn a_row_broken_without_faults_says_so_first() {
        let mut s = sample();
        s.cells[5] = cell("m-none", "fencing", &[(BAD, 0), (OK, 1)]);
        assert!(
            breaks(&s, "fencing").starts_with("lost updates with no fault at all; two holders"),
            "{}",
            breaks(&s, "fencing")
        );
    }
}
