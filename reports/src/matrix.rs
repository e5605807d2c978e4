//! The fault matrix at the head of the report: a row per scheme (grouped by family), a column
//! per fault class (the `"schemes": "all"` scenarios, grouped by fault family), each cell the
//! seeds that broke something out of the seeds run — for a random-rate column the share of
//! seeds with its 95% Wilson interval — coloured by the worst outcome and linked to the first
//! failing seed's timeline; two cost columns from the fault-free column; then one line per
//! scheme saying what breaks it.

use std::fmt::Write;

use crate::html::esc;
use crate::summary::{Cell, MatrixRow, Outcome, ScenarioInfo, Summary, fmt_ms};

/// The family of the fault-free column whose latency and throughput the cost columns show.
pub const BASELINE_FAMILY: &str = "baseline";

/// An anchor id for a cell (`#cell-<scenario>-<scheme>`), for links from other sections.
pub fn cell_id(scenario: &str, scheme: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    };
    format!("cell-{}--{}", clean(scenario), clean(scheme))
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
            format!("{}%", pct(s.violating_share())),
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
fn families<'a>(columns: &[&'a ScenarioInfo]) -> Vec<(String, Vec<&'a ScenarioInfo>)> {
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

fn is_random(col: &ScenarioInfo) -> bool {
    col.matrix.as_ref().is_some_and(|m| m.random)
}

fn short(col: &ScenarioInfo) -> &str {
    col.matrix
        .as_ref()
        .map_or(col.name.as_str(), |m| m.column.as_str())
}

/// The fault-free column, when there is one.
fn baseline(s: &Summary) -> Option<&ScenarioInfo> {
    s.matrix_columns().into_iter().find(|c| {
        c.matrix
            .as_ref()
            .is_some_and(|m| m.family == BASELINE_FAMILY)
    })
}

fn row_header(row: &MatrixRow) -> String {
    let name = esc(&row.scheme)
        .replace(':', ":<wbr>")
        .replace('/', "/<wbr>");
    if row.lease {
        name
    } else {
        format!(
            r#"{name} <span class="nolease" title="no lease: the key stays until deleted">no lease</span>"#
        )
    }
}

fn cell_title(cell: &Cell, col: &ScenarioInfo) -> String {
    let s = &cell.stats;
    let v = &s.verdicts;
    let mut title = format!(
        "{} × {}: {} of {} seeds broke something",
        s.scheme,
        short(col),
        s.seeds_violating,
        s.seeds_run
    );
    if is_random(col) {
        let _ = write!(
            title,
            " ({:.0}%, 95% interval {:.0}–{:.0}%)",
            s.violating_share() * 100.0,
            s.violating_ci95[0] * 100.0,
            s.violating_ci95[1] * 100.0
        );
    }
    let _ = write!(
        title,
        "; exclusion violated {}, resource violated {}, stuck {}; acquire p50 {} / p99 {} ms",
        v.mutual_exclusion.violated,
        v.resource_safety.violated,
        v.liveness.stuck,
        fmt_ms(s.acquire_ms.p50),
        fmt_ms(s.acquire_ms.p99)
    );
    if !cell.mismatches.is_empty() {
        let _ = write!(title, "; {} UNEXPECTED", cell.mismatches.len());
    }
    title
}

fn cell_html(cell: &Cell, col: &ScenarioInfo) -> String {
    let (big, small) = figure(cell, is_random(col));
    let inner = match &cell.timeline {
        Some(link) => format!(r#"<a href="{}">{}</a>"#, esc(link), esc(&big)),
        None => esc(&big),
    };
    let small = small.map_or(String::new(), |x| format!("<small>{}</small>", esc(&x)));
    let warn = if cell.mismatches.is_empty() {
        ""
    } else {
        r#"<b class="warn">!</b>"#
    };
    format!(
        r#"<td id="{}" class="fc o-{}" title="{}">{inner}{small}{warn}</td>"#,
        cell_id(&col.name, &cell.stats.scheme),
        cell.stats.outcome.as_str(),
        esc(&cell_title(cell, col))
    )
}

/// The CSS of the fault matrix (appended to the page's).
pub const CSS: &str = r#"
table.fm { border-collapse: separate; border-spacing: 2px; table-layout: fixed; width: 100%; margin: 8px 0 4px; font-size: 12px; }
table.fm col.rowhead { width: 188px; }
table.fm th.fam { font-size: 11px; font-weight: 600; color: #444; border-bottom: 2px solid #90a4ae; padding: 0 2px 2px; text-align: center; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
table.fm th.col { height: 128px; vertical-align: bottom; padding: 0 0 4px; font-weight: 600; font-size: 11.5px; }
table.fm th.col span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; display: inline-block; }
table.fm th.col.random span { font-style: italic; color: #37474f; }
table.fm th.cost span { color: #555; }
table.fm tbody th { text-align: right; font-weight: 600; padding: 1px 6px 1px 0; overflow-wrap: anywhere; line-height: 1.2; }
table.fm tr.famrow th { text-align: left; padding: 8px 0 1px; font-size: 12px; color: #455a64; border-bottom: 1px solid #cfd8dc; }
td.fc { text-align: center; padding: 3px 0; border-radius: 3px; line-height: 1.15; border-left: none; white-space: nowrap; }
td.fc a { color: inherit; font-weight: 700; text-decoration: none; border-bottom: 1px dotted; }
td.fc small { display: block; font-size: 10px; color: #444; }
td.fc .warn { color: #b71c1c; margin-left: 1px; }
td.cost { text-align: right; padding: 3px 3px; color: #333; font-size: 11px; white-space: nowrap; }
span.nolease { display: inline-block; font-size: 9.5px; font-weight: 600; color: #6d4c41; background: #efebe9; border-radius: 3px; padding: 0 3px; }
ul.breaks li { margin: 3px 0; }
"#;

/// The fault matrix as an HTML table, then its legend; nothing without matrix columns.
pub fn html(s: &Summary, out: &mut String) {
    let columns = s.matrix_columns();
    if columns.is_empty() {
        return;
    }
    let groups = families(&columns);
    let base = baseline(s);
    let cost_cols = if base.is_some() { 2 } else { 0 };
    let _ = write!(
        out,
        "<table class=\"fm\">\n<colgroup><col class=\"rowhead\">{}</colgroup>\n<thead><tr><th></th>",
        "<col>".repeat(columns.len() + cost_cols)
    );
    for (family, cols) in &groups {
        // A one-column family is named by its column's own header.
        let shown = if cols.len() > 1 { family.as_str() } else { "" };
        let _ = write!(
            out,
            r#"<th class="fam" colspan="{}" title="{}">{}</th>"#,
            cols.len(),
            esc(family),
            esc(shown)
        );
    }
    if cost_cols > 0 {
        out.push_str(r#"<th class="fam" colspan="2" title="cost without faults">cost</th>"#);
    }
    out.push_str("</tr>\n<tr><th></th>");
    for (_, cols) in &groups {
        for col in cols {
            let kind = if is_random(col) {
                "random rate: share of seeds that broke something, with its 95% interval. "
            } else {
                "worst case, scripted on the grant. "
            };
            let _ = write!(
                out,
                r#"<th class="col{}" title="{}"><span>{}</span></th>"#,
                if is_random(col) { " random" } else { "" },
                esc(&format!(
                    "{} ({}): {kind}{}",
                    short(col),
                    col.name,
                    col.description
                )),
                esc(short(col))
            );
        }
    }
    if let Some(base) = base {
        let _ = write!(
            out,
            r#"<th class="col cost" title="acquire latency without faults ({}): each seed's p50 and p99, median over the seeds, simulated ms"><span>p50 / p99 ms</span></th><th class="col cost" title="acquisitions per simulated second without faults ({}), all clients together"><span>acq/s</span></th>"#,
            esc(&base.name),
            esc(&base.name)
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let width = columns.len() + cost_cols + 1;
    let mut family = "";
    for row in &s.matrix_rows {
        if row.family != family {
            family = &row.family;
            let _ = writeln!(
                out,
                r#"<tr class="famrow"><th colspan="{width}">{}</th></tr>"#,
                esc(family)
            );
        }
        let _ = write!(out, "<tr><th>{}</th>", row_header(row));
        for (_, cols) in &groups {
            for col in cols {
                match s.cell(&col.name, &row.scheme) {
                    Some(cell) => out.push_str(&cell_html(cell, col)),
                    None => out.push_str(
                        r#"<td class="none" title="this scheme does not run in this scenario">—</td>"#,
                    ),
                }
            }
        }
        if let Some(base) = base {
            match s.cell(&base.name, &row.scheme) {
                Some(c) if c.stats.acquire_ms.runs > 0 => {
                    let _ = write!(
                        out,
                        r#"<td class="cost">{}/{}</td><td class="cost">{:.1}</td>"#,
                        fmt_ms(c.stats.acquire_ms.p50),
                        fmt_ms(c.stats.acquire_ms.p99),
                        c.stats.throughput_per_s
                    );
                }
                _ => out.push_str(r#"<td class="cost">—</td><td class="cost">—</td>"#),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// What breaks one row: its failing worst-case columns grouped by outcome (worst first), then
/// its random-rate columns with a non-zero rate. A row that breaks without faults says so and
/// lists only the columns that break it otherwise.
pub fn breaks(s: &Summary, scheme: &str) -> String {
    let columns = ordered_columns(s);
    let outcome_in = |c: &ScenarioInfo| s.cell(&c.name, scheme).map(|cell| cell.stats.outcome);
    let unfaulted = baseline(s)
        .and_then(&outcome_in)
        .filter(|o| *o > Outcome::Ok);
    let mut parts = Vec::new();
    if let Some(outcome) = unfaulted {
        parts.push(format!(
            "{} with no fault at all",
            outcome_words(outcome).trim_end_matches(" under")
        ));
    }
    for outcome in [
        Outcome::Corrupted,
        Outcome::Overlap,
        Outcome::Stuck,
        Outcome::Unfair,
    ] {
        if unfaulted == Some(outcome) {
            continue;
        }
        let names: Vec<&str> = columns
            .iter()
            .filter(|c| !is_random(c) && outcome_in(c) == Some(outcome))
            .map(|c| short(c))
            .collect();
        if !names.is_empty() {
            parts.push(format!("{} {}", outcome_words(outcome), names.join(" · ")));
        }
    }
    let random: Vec<String> = columns
        .iter()
        .filter(|c| is_random(c))
        .filter_map(|c| {
            let cell = s.cell(&c.name, scheme)?;
            (cell.stats.seeds_violating > 0)
                .then(|| format!("{} {:.0}%", short(c), cell.stats.violating_share() * 100.0))
        })
        .collect();
    if !random.is_empty() {
        parts.push(format!("random faults: {}", random.join(" · ")));
    }
    if parts.is_empty() {
        "nothing in this matrix breaks it".into()
    } else {
        parts.join("; ")
    }
}

/// The outcome as the "what breaks it" lines say it.
fn outcome_words(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Corrupted => "lost updates under",
        Outcome::Overlap => "held twice (the resource stayed safe) under",
        Outcome::Stuck => "stuck under",
        Outcome::Unfair => "FIFO order lost under",
        Outcome::Ok | Outcome::NoRuns => "",
    }
}

/// "What breaks it": one line per matrix row.
pub fn breaks_html(s: &Summary, out: &mut String) {
    if s.matrix_rows.is_empty() {
        return;
    }
    out.push_str("<ul class=\"breaks\">\n");
    for row in &s.matrix_rows {
        let _ = writeln!(
            out,
            "<li><b>{}</b>{} — {}</li>",
            esc(&row.scheme),
            if row.lease { "" } else { " (no lease)" },
            esc(&breaks(s, &row.scheme))
        );
    }
    out.push_str("</ul>\n");
}

/// The fault matrix as a Markdown table (a letter per outcome), then "what breaks it".
pub fn markdown(s: &Summary, out: &mut String) {
    let columns = ordered_columns(s);
    if columns.is_empty() {
        return;
    }
    let base = baseline(s);
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
    if base.is_some() {
        header.push_str(" p50 / p99 ms | acq/s |");
        rule.push_str("--:|--:|");
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
        if let Some(base) = base {
            match s.cell(&base.name, &row.scheme) {
                Some(c) if c.stats.acquire_ms.runs > 0 => {
                    let _ = write!(
                        out,
                        " {} / {} | {:.1} |",
                        fmt_ms(c.stats.acquire_ms.p50),
                        fmt_ms(c.stats.acquire_ms.p99),
                        c.stats.throughput_per_s
                    );
                }
                _ => out.push_str(" — | — |"),
            }
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
mod tests {
    use super::*;
    use crate::charts::ChartSet;
    use crate::summary::tests::{BAD, FENCED, OK, result};
    use crate::summary::{Cell, CellStats, MatrixColumn};

    fn column(name: &str, column: &str, family: &str, random: bool) -> ScenarioInfo {
        ScenarioInfo {
            name: name.into(),
            file: format!("scenarios/matrix/{name}.json"),
            description: format!("{column}, in full"),
            source: String::new(),
            seeds: "0..3".into(),
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

    fn cell(scenario: &str, scheme: &str, verdicts: &[(Verdicts, u64)]) -> Cell {
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

    /// Two rows (one without a lease) × a fault-free column, a worst case and a random rate.
    fn sample() -> Summary {
        let mut s = crate::html::tests::sample();
        s.scenarios = vec![
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
            cell("m-none", "setnx-del", &[(OK, 0), (OK, 1)]),
            cell("m-pause", "setnx-del", &[(OK, 0), (OK, 1)]),
            cell("m-rand", "setnx-del", &[(OK, 0), (OK, 1), (OK, 2), (OK, 3)]),
            cell("m-none", "fencing", &[(OK, 0), (OK, 1)]),
            cell("m-pause", "fencing", &[(FENCED, 0), (FENCED, 1)]),
            cell("m-rand", "fencing", &[(BAD, 0), (OK, 1), (OK, 2), (OK, 3)]),
        ];
        s
    }

    #[test]
    fn the_matrix_groups_rows_and_columns_and_reports_rates() {
        let s = sample();
        let mut html = String::new();
        super::html(&s, &mut html);
        assert!(html.contains(r#"<th class="fam" colspan="2" title="pauses">pauses</th>"#));
        assert!(
            html.contains(r#"<tr class="famrow"><th colspan="6">SETNX</th></tr>"#),
            "{html}"
        );
        assert!(html.contains("no lease"));
        // Worst case: seeds violating / run; random rate: a share with its Wilson interval.
        assert!(html.contains(">2/2<"));
        assert!(html.contains(">25%<small>5–70</small>"), "{html}");
        assert!(html.contains(r#"id="cell-m-pause--fencing" class="fc o-overlap""#));
        // The cost columns come from the fault-free column.
        assert!(html.contains(r#"<td class="cost">2.0/9.0</td><td class="cost">10.0</td>"#));
        assert_eq!(
            breaks(&s, "fencing"),
            "held twice (the resource stayed safe) under GC pause; random faults: random pauses 25%"
        );
        assert_eq!(breaks(&s, "setnx-del"), "nothing in this matrix breaks it");
        let page = crate::html::render(&s, &ChartSet::render(&s));
        assert!(page.find("The matrix").unwrap() < page.find("The catalog").unwrap());
        let mut md = String::new();
        markdown(&s, &mut md);
        assert!(
            md.contains("| fencing | 0/2 ok | 2/2 X | 25% [5–70] C | 2.0 / 9.0 | 10.0 |"),
            "{md}"
        );
        assert!(md.contains("| setnx-del (no lease) |"));
    }
}
