//! `report.md`: the comparison in Markdown — the same numbers as `index.html`, in the same
//! order: which lock to use for what, the fault matrix as one table (a letter per outcome) and
//! what breaks each scheme, the debate, the incidents, then the catalog with one table row per
//! scenario × scheme cell (a wide matrix of long scenario names reads badly as Markdown), the
//! charts as image links to `charts/*.svg`, the scenarios, mismatches and errors.

use std::fmt::Write;

use crate::charts::ChartSet;
use crate::summary::{Summary, fmt_ms};

/// Makes text safe inside a Markdown table cell.
fn cell_text(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn render(s: &Summary, charts: &ChartSet) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# locksim — which lock should you use, and what breaks it?\n"
    );
    let _ = writeln!(out, "{}\n", s.headline());
    if s.interrupted {
        let _ = writeln!(
            out,
            "> **Interrupted** (Ctrl-C): only the runs that finished are counted.\n"
        );
    }
    let mismatches = s.mismatch_count();
    if mismatches > 0 {
        let _ = writeln!(
            out,
            "> **{mismatches} verdict(s) differ from the scenarios' expectations** (see below).\n"
        );
    }
    if !s.matrix_columns().is_empty() {
        let _ = writeln!(out, "## Which lock should you use?\n");
        crate::advice::markdown(s, &mut out);
        let _ = writeln!(out, "## The matrix: every lock under every fault\n");
        crate::matrix::markdown(s, &mut out);
        let _ = writeln!(out, "## The debate, replayed\n");
        let _ = writeln!(
            out,
            "Each claim next to the cells that test it (✓: the runs show what it predicts; ✗: they do not). Claims are paraphrased; quotes are verbatim from the seed articles.\n"
        );
        crate::debate::markdown(s, &mut out);
    }
    let incidents = crate::incidents::markdown(s);
    if !incidents.is_empty() {
        out.push_str(&incidents);
        out.push('\n');
    }
    let _ = writeln!(out, "## The catalog\n");
    let _ = writeln!(
        out,
        "Outcome: `ok` every seed safe and live · `unfair` FIFO order lost (scenarios that judge it) · `stuck` liveness failed · `overlap` lock held twice, no update lost · `corrupted` a lost update. Latency: each seed's acquire p50/p99, median over the seeds (simulated ms). Longest wait: the longest any client waited for the lock, on any seed (starvation; not a liveness failure while others get the lock).\n"
    );
    let _ = writeln!(
        out,
        "| scenario | scheme | outcome | seeds run | violating | first failing seed | failed verdicts | acquire p50 | acquire p99 | longest wait | acq/s | expectations |"
    );
    let _ = writeln!(out, "|---|---|---|--:|--:|---|---|--:|--:|--:|--:|---|");
    for sc in s
        .catalog_scenarios()
        .into_iter()
        .filter(|sc| sc.incident.is_none())
    {
        for scheme in &s.schemes {
            let Some(cell) = s.cell(&sc.name, scheme) else {
                continue;
            };
            let st = &cell.stats;
            let first = match (st.first_failing_seed, &cell.timeline) {
                (Some(seed), Some(link)) => format!("[seed {seed}]({link})"),
                (Some(seed), None) => format!("seed {seed}"),
                (None, _) => "—".to_string(),
            };
            let notes = cell.verdict_notes();
            let (p50, p99) = if st.acquire_ms.runs > 0 {
                (fmt_ms(st.acquire_ms.p50), fmt_ms(st.acquire_ms.p99))
            } else {
                ("—".into(), "—".into())
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                cell_text(&sc.name),
                cell_text(scheme),
                st.outcome.as_str(),
                st.seeds_run,
                st.seeds_violating,
                first,
                if notes.is_empty() {
                    "—".to_string()
                } else {
                    notes.join(", ")
                },
                p50,
                p99,
                fmt_ms(st.max_wait_ms.max),
                st.throughput_per_s,
                if cell.mismatches.is_empty() {
                    "met".to_string()
                } else {
                    format!("**{} unexpected**", cell.mismatches.len())
                }
            );
        }
    }
    let _ = writeln!(out, "\n## Charts\n");
    for chart in &charts.charts {
        let _ = writeln!(out, "![{}](charts/{})\n", chart.caption, chart.file);
    }
    let _ = writeln!(out, "## Scenarios\n");
    for sc in &s.scenarios {
        let _ = write!(
            out,
            "- **{}** (`{}`, seeds {}): {}",
            sc.name, sc.file, sc.seeds, sc.description
        );
        if !sc.source.is_empty() {
            let _ = write!(out, " — source: {}", sc.source);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "\n## Expectations\n");
    if mismatches == 0 {
        let _ = writeln!(
            out,
            "Every verdict these runs gave matches its scenario's `expect`."
        );
    } else {
        for cell in &s.cells {
            for m in &cell.mismatches {
                let _ = writeln!(out, "- {m}");
            }
        }
    }
    let replays: Vec<_> = s.cells.iter().filter_map(|c| c.replay.as_ref()).collect();
    if !replays.is_empty() {
        let _ = writeln!(out, "\n## Reproduce\n\n```sh");
        for r in replays {
            let _ = writeln!(out, "{r}");
        }
        let _ = writeln!(out, "```");
    }
    if !s.errors.is_empty() {
        let _ = writeln!(out, "\n## Errors\n");
        for e in &s.errors {
            let _ = writeln!(out, "- {e}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::tests::sample;

    #[test]
    fn one_row_per_cell_with_the_same_numbers() {
        let s = sample();
        let md = render(&s, &ChartSet::render(&s));
        assert!(md.starts_with("# locksim"));
        assert!(md.contains(
            "| gc-pause | set-nx-px-lua | corrupted | 2 | 1 | [seed 0](runs/gc-pause/set-nx-px-lua/seed-0/timeline.svg) | exclusion ✗ 1, resource ✗ 1 | 4.5 | 518 | 1027 | 10.0 | met |"
        ), "{md}");
        assert!(md.contains("| gc-pause | fencing | overlap | 1 | 1 | seed 4 |"));
        assert!(md.contains("**1 unexpected**"));
        assert_eq!(md.matches("\n| ").count(), 3 + 1, "header + three cells");
        assert!(md.contains("](charts/violations.svg)"));
        assert!(md.contains("locksim replay x.json --seed 0"));
        assert!(md.contains("- gc-pause [fencing] seed 4: mutual_exclusion expected holds"));
    }
}
