//! The catalog: every scenario that is neither a matrix column nor an incident, one row each
//! (grouped by folder), with a chip per scheme it runs — so a scenario of two schemes takes
//! one line, not a block of 33 rows of "—".

use maud::{Markup, html};

use super::{Count, count, legend};
use crate::matrix::cell_id;
use crate::summary::{Cell, ScenarioInfo, Summary, fmt_ms};

fn title(cell: &Cell) -> String {
    let s = &cell.stats;
    format!(
        "{} × {}: {} of {} seeds violating; mutual exclusion holds {} / violated {}; resource holds {} / violated {}; liveness ok {} / stuck {}; {} acquisitions, {} failed; acquire p50 {} / p90 {} / p99 {} / max {} ms; longest wait for the lock {} ms (median seed {} ms); {:.1} acquisitions/s",
        s.scheme,
        s.scenario,
        s.seeds_violating,
        s.seeds_run,
        s.verdicts.mutual_exclusion.holds,
        s.verdicts.mutual_exclusion.violated,
        s.verdicts.resource_safety.holds,
        s.verdicts.resource_safety.violated,
        s.verdicts.liveness.ok,
        s.verdicts.liveness.stuck,
        s.acquisitions,
        s.acquire_failures,
        fmt_ms(s.acquire_ms.p50),
        fmt_ms(s.acquire_ms.p90),
        fmt_ms(s.acquire_ms.p99),
        fmt_ms(s.acquire_ms.max),
        fmt_ms(s.max_wait_ms.max),
        fmt_ms(s.max_wait_ms.median),
        s.throughput_per_s
    )
}

fn chip(cell: &Cell) -> Markup {
    let s = &cell.stats;
    let notes = cell.verdict_notes();
    html! {
        span id=(cell_id(&s.scenario, &s.scheme)) class=(format!("chip o-{}", s.outcome.as_str())) title=(title(cell)) {
            (s.scheme) " "
            @if s.seeds_run == 0 {
                b { "no finished runs" }
            } @else {
                b { (count(cell, Count::Violating, &format!("{}/{}", s.seeds_violating, s.seeds_run))) }
                @if let Some(seed) = s.first_failing_seed {
                    " · "
                    @match &cell.timeline {
                        Some(link) => a href=(link) { "seed " (seed) },
                        None => { "seed " (seed) },
                    }
                }
                @if s.acquire_ms.runs > 0 {
                    " " small { "p50 " (fmt_ms(s.acquire_ms.p50)) " · p99 " (fmt_ms(s.acquire_ms.p99)) " ms" }
                }
                @if !notes.is_empty() { " " small { (notes.join(" · ")) } }
                @if !cell.mismatches.is_empty() { " " span.warn { "⚠ " (cell.mismatches.len()) " unexpected" } }
            }
        }
    }
}

/// The folder a scenario file is in (`scenarios`, `scenarios/shrunk`).
fn folder(sc: &ScenarioInfo) -> &str {
    sc.file.rsplit_once('/').map_or("", |(dir, _)| dir)
}

pub fn section(s: &Summary) -> Markup {
    let scenarios: Vec<&ScenarioInfo> = s
        .catalog_scenarios()
        .into_iter()
        .filter(|sc| sc.incident.is_none())
        .collect();
    let mut folders: Vec<&str> = Vec::new();
    for sc in &scenarios {
        if !folders.contains(&folder(sc)) {
            folders.push(folder(sc));
        }
    }
    html! {
        h2 #catalog { "The catalog" }
        p { "Every other scenario: each scheme under the one case its source (or the literature) says breaks it, and the fault-free baselines. A row per scenario (hover its name for the whole description), a chip per scheme it runs: seeds that broke something out of seeds run; the first failing seed, linked to its timeline; acquire latency (each seed's p50 and p99, median over the seeds); which verdicts failed and how often. Hover a chip for every count." }
        (legend())
        @if scenarios.is_empty() {
            p { "No catalog scenarios in this report." }
        }
        @for dir in &folders {
            @if folders.len() > 1 { h3 { code { (dir) "/" } } }
            table.catalog {
                colgroup { col.sc; col; }
                tbody {
                    @for sc in scenarios.iter().filter(|sc| folder(sc) == *dir) {
                        tr {
                            td.sc title=(sc.description) { b { (sc.name) } span.meta { (sc.description) } }
                            td {
                                @for scheme in &s.schemes {
                                    @if let Some(cell) = s.cell(&sc.name, scheme) { (chip(cell)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
