//! `index.html`: the comparison as one self-contained page (inline CSS, the charts inlined as
//! SVG, no network), readable at 1280 px without horizontal scrolling, built with maud (the
//! library escapes every value). In reading order: which lock to use for what (`advice`), the
//! fault matrix and what breaks each scheme (`fault_matrix`), what the locks cost, the debate
//! replayed (`debate`), the incidents (`incidents`), the catalog (`catalog`), the heat maps,
//! the scenarios, the expectations and the commands that reproduce every failing cell.
//!
//! Every count of seeds on the page is a [`count`]: an element that names its cell and what it
//! counts, so `audit` can check each one against `summary.json` and the terminal.

mod advice;
mod catalog;
mod debate;
mod fault_matrix;
mod incidents;
mod style;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::charts::{Chart, ChartSet, Group};
use crate::matrix::cell_id;
use crate::summary::{Cell, Outcome, Summary};

/// What a [`count`] counts (the `data-count` attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Seeds that broke anything judged (`seeds_violating`), as `k/n` — or, in a random-rate
    /// column, as the share of seeds `p%`.
    Violating,
    /// Seeds with the incident's reported failure (`expect_broken_seeds`).
    Reported,
    /// Seeds with two holders or a lost update (`verdicts.unsafe_runs`).
    Unsafe,
    /// Seeds with a lost update (`verdicts.resource_safety.violated`).
    Lost,
    /// Seeds stuck (`verdicts.liveness.stuck`).
    Stuck,
}

impl Count {
    pub fn as_str(self) -> &'static str {
        match self {
            Count::Violating => "violating",
            Count::Reported => "reported",
            Count::Unsafe => "unsafe",
            Count::Lost => "lost",
            Count::Stuck => "stuck",
        }
    }

    pub fn parse(s: &str) -> Option<Count> {
        [
            Count::Violating,
            Count::Reported,
            Count::Unsafe,
            Count::Lost,
            Count::Stuck,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// A count of seeds of one cell, marked with the cell and what it counts.
fn count(cell: &Cell, what: Count, text: &str) -> Markup {
    html! {
        span.n data-cell=(cell_id(&cell.stats.scenario, &cell.stats.scheme)) data-count=(what.as_str()) { (text) }
    }
}

/// A name that may break after its hyphens, colons and slashes in a narrow column (never
/// inside a word).
fn breakable(name: &str) -> Markup {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in name.char_indices() {
        if matches!(c, '-' | ':' | '/' | '@') {
            pieces.push(&name[start..=i]);
            start = i + 1;
        }
    }
    pieces.push(&name[start..]);
    html! {
        @for (i, piece) in pieces.iter().enumerate() {
            @if i > 0 { wbr; }
            (piece)
        }
    }
}

/// The outcome colours, one swatch each.
fn legend() -> Markup {
    html! {
        div.legend {
            @for outcome in Outcome::ALL {
                div { span class=(format!("sw o-{}", outcome.as_str())) {} (outcome.legend()) }
            }
        }
    }
}

/// The sections of the page, in order: (anchor, title in the navigation bar).
const NAV: &[(&str, &str)] = &[
    ("advice", "Which lock"),
    ("matrix", "Fault matrix"),
    ("breaks", "What breaks it"),
    ("cost", "Cost"),
    ("debate", "The debate"),
    ("incidents", "Incidents"),
    ("catalog", "Catalog"),
    ("charts", "Heat maps"),
    ("scenarios", "Scenarios"),
    ("expectations", "Expectations"),
    ("reproduce", "Reproduce"),
];

fn header(s: &Summary, present: &[&str]) -> Markup {
    let mismatches = s.mismatch_count();
    html! {
        h1 { "locksim — which lock should you use, and what breaks it?" }
        p.meta { (s.headline()) }
        @if s.interrupted {
            p.alert { "Interrupted (Ctrl-C): this report shows only the runs that finished." }
        }
        @if !s.errors.is_empty() {
            p."alert bad" { (s.errors.len()) " run(s) could not be simulated: see " a href="#errors" { "Errors" } "." }
        }
        @if mismatches > 0 {
            p."alert bad" { (mismatches) " verdict(s) differ from the scenarios' expectations: see " a href="#expectations" { "Expectations" } "." }
        }
        nav.toc {
            @for (anchor, title) in NAV.iter().filter(|(a, _)| present.contains(a)) {
                a href=(format!("#{anchor}")) { (title) }
            }
        }
    }
}

fn figure(chart: &Chart) -> Markup {
    let svg = chart
        .svg
        .replacen("<svg ", r#"<svg style="max-width:100%;height:auto" "#, 1);
    html! {
        figure id=(format!("chart-{}", chart.file.trim_end_matches(".svg"))) {
            (PreEscaped(svg))
            figcaption { (chart.caption) " — also " a href=(format!("charts/{}", chart.file)) { "charts/" (chart.file) } }
        }
    }
}

fn cost(charts: &ChartSet) -> Markup {
    let cost: Vec<&Chart> = charts.in_group(Group::Cost).collect();
    html! {
        @if !cost.is_empty() {
            h2 #cost { "What it costs" }
            p { "Without faults. Uncontended: one client alone, so an acquisition is the lock's own round trips. Under contention: several clients want the lock at once, so an acquisition is mostly waiting for it, and what a lock promises shows as throughput and waits. The median wait under contention counts the grants a releasing client takes back at once (it asks again within its think time, before the waiters' next poll) against those that waited a polling period: a lock that polls faster is fairer and shows a higher median, not a slower lock (README, “What it costs”)." }
            @for chart in cost { (figure(chart)) }
        }
    }
}

fn heat_maps(charts: &ChartSet) -> Markup {
    let maps: Vec<&Chart> = charts.in_group(Group::HeatMap).collect();
    html! {
        @if !maps.is_empty() {
            h2 #charts { "Heat maps" }
            @for chart in maps { (figure(chart)) }
        }
    }
}

fn scenarios(s: &Summary) -> Markup {
    html! {
        h2 #scenarios { "Scenarios" }
        dl.scenarios {
            @for sc in &s.scenarios {
                dt id=(format!("scenario-{}", cell_id(&sc.name, ""))) { (sc.name) }
                dd { (sc.description) }
                dd {
                    code { (sc.file) } ", seeds " (sc.seeds)
                    @if !sc.source.is_empty() { " — source: " (sc.source) }
                }
            }
        }
    }
}

fn expectations(s: &Summary) -> Markup {
    html! {
        h2 #expectations { "Expectations" }
        @if s.mismatch_count() == 0 {
            p { "Every verdict these runs gave matches its scenario's " code { "expect" } "." }
        } @else {
            ul.mismatches {
                @for cell in &s.cells { @for m in &cell.mismatches { li { (m) } } }
            }
        }
    }
}

fn reproduce(s: &Summary) -> Markup {
    let replays: Vec<&Cell> = s.cells.iter().filter(|c| c.replay.is_some()).collect();
    html! {
        @if !replays.is_empty() {
            h2 #reproduce { "Reproduce" }
            p { "The first failing seed of each cell, as a command (printed the way " code { "compare" } " was run):" }
            ul.reproduce {
                @for cell in replays {
                    li { (cell.stats.scheme) " × " (cell.stats.scenario) ": " code { (cell.replay.as_deref().unwrap_or_default()) } }
                }
            }
        }
    }
}

fn errors(s: &Summary) -> Markup {
    html! {
        @if !s.errors.is_empty() {
            h2 #errors { "Errors" }
            ul { @for e in &s.errors { li { (e) } } }
        }
    }
}

/// The sections this report has (the navigation bar links only those).
fn present(s: &Summary, charts: &ChartSet) -> Vec<&'static str> {
    let matrix = !s.matrix_columns().is_empty();
    let mut out = Vec::new();
    if matrix {
        out.extend(["advice", "matrix", "breaks", "debate"]);
    }
    if charts.in_group(Group::Cost).next().is_some() {
        out.push("cost");
    }
    if !crate::incidents::cases(s).is_empty() {
        out.push("incidents");
    }
    out.extend(["catalog", "charts", "scenarios", "expectations"]);
    if s.cells.iter().any(|c| c.replay.is_some()) {
        out.push("reproduce");
    }
    out
}

/// The whole page.
pub fn render(s: &Summary, charts: &ChartSet) -> String {
    let present = present(s, charts);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "locksim — which lock should you use, and what breaks it?" }
                style { (PreEscaped(style::css())) }
            }
            body {
                main {
                    (header(s, &present))
                    (advice::section(s))
                    (fault_matrix::section(s))
                    (cost(charts))
                    (debate::section(s))
                    (incidents::section(s))
                    (catalog::section(s))
                    (heat_maps(charts))
                    (scenarios(s))
                    (expectations(s))
                    (reproduce(s))
                    (errors(s))
                    footer {
                        "Generated by " code { "locksim compare" } ". The same numbers are in " code { "summary.json" } " and " code { "report.md" } " beside this page. Same scenario + same seed ⇒ the same trace: every seed named here replays exactly."
                    }
                }
            }
        }
    }
    .into_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::summary::tests::{BAD, FENCED, OK, result};
    use crate::summary::{CellStats, ScenarioInfo, SchemeStats};

    /// Two scenarios, two schemes, three cells (one empty).
    pub fn sample() -> Summary {
        let a = vec![
            result("gc-pause", "set-nx-px-lua", 0, BAD, (7.0, 1027.0)),
            result("gc-pause", "set-nx-px-lua", 1, OK, (2.0, 9.0)),
        ];
        let b = vec![result("gc-pause", "fencing", 4, FENCED, (3.0, 30.0))];
        let c = vec![result("base<line>", "set-nx-px-lua", 0, OK, (1.0, 2.0))];
        let cell = |stats: CellStats, timeline: Option<&str>, mismatches: Vec<String>| Cell {
            replay: stats
                .first_failing_seed
                .map(|seed| format!("locksim replay x.json --seed {seed}")),
            stats,
            mismatches,
            timeline: timeline.map(String::from),
            expect_broken_seeds: None,
        };
        let all: Vec<_> = a.iter().chain(&c).cloned().collect();
        Summary {
            seed_policy: "each scenario's first 10 seeds".into(),
            interrupted: false,
            runs: 4,
            wall_s: 1.5,
            scenarios: vec![
                ScenarioInfo {
                    name: "gc-pause".into(),
                    file: "scenarios/gc-pause.json".into(),
                    description: "a pause".into(),
                    source: "Kleppmann 2016".into(),
                    seeds: "0..9".into(),
                    clients: 2,
                    incident: None,
                    matrix: None,
                },
                ScenarioInfo {
                    name: "base<line>".into(),
                    file: "scenarios/b.json".into(),
                    description: "no faults".into(),
                    source: String::new(),
                    seeds: "0..9".into(),
                    clients: 2,
                    incident: None,
                    matrix: None,
                },
            ],
            schemes: vec!["set-nx-px-lua".into(), "fencing".into()],
            matrix_rows: vec![],
            cells: vec![
                cell(
                    CellStats::from_results("gc-pause", "set-nx-px-lua", &a),
                    Some("runs/gc-pause/set-nx-px-lua/seed-0/timeline.svg"),
                    vec![],
                ),
                cell(
                    CellStats::from_results("gc-pause", "fencing", &b),
                    None,
                    vec![
                        "gc-pause [fencing] seed 4: mutual_exclusion expected holds, got violated"
                            .into(),
                    ],
                ),
                cell(
                    CellStats::from_results("base<line>", "set-nx-px-lua", &c),
                    None,
                    vec![],
                ),
            ],
            scheme_totals: vec![
                SchemeStats::from_results("set-nx-px-lua", 2, &all),
                SchemeStats::from_results("fencing", 1, &b),
            ],
            errors: vec![],
        }
    }

    #[test]
    fn the_page_is_self_contained_and_shows_every_cell() {
        let s = sample();
        let html = render(&s, &ChartSet::render(&s));
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<style>"));
        // No network: nothing is fetched from elsewhere.
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link "));
        // Cells: counts (marked with their cell), the first failing seed linked to its
        // timeline, latency, colour class.
        assert!(
            html.contains(r#"<span class="n" data-cell="cell-gc-pause--set-nx-px-lua" data-count="violating">1/2</span>"#),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<a href="runs/gc-pause/set-nx-px-lua/seed-0/timeline.svg">seed 0</a>"#
            )
        );
        assert!(html.contains("p50 4.5 · p99 518 ms"), "{html}");
        assert!(
            html.contains("o-corrupted") && html.contains("o-overlap") && html.contains("o-ok")
        );
        assert!(html.contains("⚠ 1 unexpected"));
        // Names are escaped by the library; charts are inlined.
        assert!(html.contains("base&lt;line&gt;") && !html.contains("base<line>"));
        assert!(html.matches("<svg ").count() >= 1);
        assert!(html.contains("locksim replay x.json --seed 0"));
        // The catalog comes before the heat maps; the navigation links what is there.
        assert!(html.find("id=\"catalog\"").unwrap() < html.find("id=\"charts\"").unwrap());
        assert!(
            html.contains(r##"<a href="#catalog">"##) && !html.contains(r##"<a href="#advice">"##)
        );
    }

    #[test]
    fn names_break_only_after_separators() {
        assert_eq!(
            breakable("redlock:leandromoreira/redlock-rb").into_string(),
            "redlock:<wbr>leandromoreira/<wbr>redlock-<wbr>rb"
        );
        assert_eq!(breakable("a<b").into_string(), "a&lt;b");
    }
}
