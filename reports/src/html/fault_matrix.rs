//! The fault matrix as an HTML table (rows grouped by family, columns by fault family, the
//! cost columns last), then "what breaks it", a line per row.

use maud::{Markup, html};

use super::{Count, breakable, count, legend};
use crate::matrix::{
    breaks, cell_id, cost, cost_headers, families, figure, is_random, ordered_columns, short,
};
use crate::summary::{Cell, ScenarioInfo, Summary, fmt_ms};

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
        title.push_str(&format!(
            " ({:.0}%, 95% interval {:.0}–{:.0}%)",
            s.violating_share() * 100.0,
            s.violating_ci95[0] * 100.0,
            s.violating_ci95[1] * 100.0
        ));
    }
    title.push_str(&format!(
        "; exclusion violated {}, resource violated {}, stuck {}; acquire p50 {} / p99 {} ms",
        v.mutual_exclusion.violated,
        v.resource_safety.violated,
        v.liveness.stuck,
        fmt_ms(s.acquire_ms.p50),
        fmt_ms(s.acquire_ms.p99)
    ));
    if !cell.mismatches.is_empty() {
        title.push_str(&format!("; {} UNEXPECTED", cell.mismatches.len()));
    }
    title
}

fn cell_html(cell: &Cell, col: &ScenarioInfo) -> Markup {
    let (big, small) = figure(cell, is_random(col));
    html! {
        td id=(cell_id(&col.name, &cell.stats.scheme)) class=(format!("fc o-{}", cell.stats.outcome.as_str())) title=(cell_title(cell, col)) {
            @match &cell.timeline {
                Some(link) => a href=(link) { (count(cell, Count::Violating, &big)) },
                None => (count(cell, Count::Violating, &big)),
            }
            @if let Some(small) = small { small { (small) } }
            @if !cell.mismatches.is_empty() { b.warn { "!" } }
        }
    }
}

fn table(s: &Summary) -> Markup {
    let columns = s.matrix_columns();
    let groups = families(&columns);
    let (uncontended, contended) = cost_headers(s);
    let cost_cols = usize::from(uncontended.is_some()) + usize::from(contended.is_some());
    let width = columns.len() + cost_cols + 1;
    html! {
        table.fm {
            colgroup {
                col.rowhead;
                @for _ in 0..(columns.len() + cost_cols) { col; }
            }
            thead {
                tr {
                    th {}
                    @for (family, cols) in &groups {
                        // A one-column family is named by its column's own header.
                        th.fam colspan=(cols.len()) title=(family) {
                            @if cols.len() > 1 { (family) }
                        }
                    }
                    @if cost_cols > 0 { th.fam colspan=(cost_cols) title="cost without faults" { "cost" } }
                }
                tr {
                    th {}
                    @for (_, cols) in &groups {
                        @for col in cols {
                            @let kind = if is_random(col) { "random rate: share of seeds that broke something, with its 95% interval. " } else { "worst case, scripted on the grant. " };
                            th class=(if is_random(col) { "col random" } else { "col" }) title=(format!("{} ({}): {kind}{}", short(col), col.name, col.description)) {
                                span { (short(col)) }
                            }
                        }
                    }
                    @if let Some(h) = &uncontended {
                        th."col cost" title="acquire latency of one client alone, no faults: each seed's p50 and p99, median over the seeds, simulated ms" { span { (h) } }
                    }
                    @if let Some(h) = &contended {
                        th."col cost" title="acquisitions per simulated second, all clients together, no faults" { span { (h) } }
                    }
                }
            }
            tbody {
                @for (i, row) in s.matrix_rows.iter().enumerate() {
                    @if i == 0 || s.matrix_rows[i - 1].family != row.family {
                        tr.famrow { th colspan=(width) { (row.family) } }
                    }
                    tr {
                        th {
                            (breakable(&row.scheme))
                            @if !row.lease { " " span.nolease title="no lease: the key stays until deleted" { "no lease" } }
                        }
                        @for (_, cols) in &groups {
                            @for col in cols {
                                @match s.cell(&col.name, &row.scheme) {
                                    Some(cell) => (cell_html(cell, col)),
                                    None => td.none title="this scheme does not run in this scenario" { "—" },
                                }
                            }
                        }
                        @let (lat, thr) = cost(s, &row.scheme);
                        @if uncontended.is_some() {
                            td.cost { @match lat { Some((p50, p99)) => { (fmt_ms(p50)) " · " (fmt_ms(p99)) }, None => "—" } }
                        }
                        @if contended.is_some() {
                            td.cost { @match thr { Some(t) => (format!("{t:.1}")), None => "—" } }
                        }
                    }
                }
            }
        }
    }
}

/// The matrix and "what breaks it": nothing without matrix columns.
pub fn section(s: &Summary) -> Markup {
    if ordered_columns(s).is_empty() {
        return html! {};
    }
    html! {
        h2 #matrix { "The matrix: every lock under every fault" }
        p { "A row per lock scheme (grouped by how it locks; " span.nolease { "no lease" } ": the key never expires by itself), a column per fault class (grouped by family). Upright headers are worst cases, scripted to strike the first grant: each cell is the seeds that broke something out of the seeds run. " i { "Italic" } " headers are random-rate columns (the random nemesis restricted to that family): the share of seeds that broke something, with its 95% Wilson interval below. Colour: the worst outcome; a linked figure opens the first failing seed's timeline; hover for the counts and the column's description. The cost columns come from the fault-free columns (see “What it costs”)." }
        (legend())
        (table(s))
        h2 #breaks { "What breaks it" }
        p { "Per scheme, the worst cases that broke it on some seed, by outcome, then the random-rate columns in which some seed broke something." }
        ul.breaks {
            @for row in &s.matrix_rows {
                li { b { (row.scheme) } @if !row.lease { " (no lease)" } " — " (breaks(s, &row.scheme)) }
            }
        }
    }
}
