//! `index.html`: the comparison as one self-contained page (inline CSS, the charts inlined as
//! SVG, no network), readable at 1280 px without horizontal scrolling. It opens with the fault
//! matrix (`matrix`: every scheme under every fault class) and what breaks each scheme, then
//! the debate replayed (`debate`), then the catalog's scheme × scenario matrix, split into
//! tables of at most [`MAX_COLUMNS`] scenarios, its charts, the scenarios and expectations.
//! [`render`] is a list of sections, one call each.

use std::fmt::Write;

use crate::charts::{ChartSet, hex, outcome_color};
use crate::summary::{Cell, Outcome, ScenarioInfo, Summary, fmt_ms};

/// Scenarios per matrix table: more would not fit 1280 px.
pub const MAX_COLUMNS: usize = 6;

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name that may break after its hyphens in a narrow column.
fn breakable(name: &str) -> String {
    esc(name).replace('-', "-<wbr>").replace(':', ":<wbr>")
}

fn css() -> String {
    let mut css = String::from(crate::matrix::CSS);
    css.push_str(crate::debate::CSS);
    css.push_str(
        r#"
* { box-sizing: border-box; }
body { margin: 0; background: #eef0f2; color: #212121;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1220px; margin: 0 auto; padding: 22px 28px 40px; background: #fff; min-height: 100vh; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 30px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e0e0e0; }
p { margin: 6px 0; }
.meta { color: #555; }
.alert { background: #fff3e0; border: 1px solid #ffb74d; padding: 8px 12px; border-radius: 4px; margin: 10px 0; }
.alert.bad { background: #ffebee; border-color: #e57373; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 10px 0 4px; font-size: 13px; }
.legend span.sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: -2px; margin-right: 6px; }
table.matrix { border-collapse: separate; border-spacing: 4px; table-layout: fixed; width: 100%; margin: 10px 0 6px; }
table.matrix th { font-weight: 600; font-size: 13px; }
table.matrix thead th { text-align: left; vertical-align: bottom; padding: 2px 6px; overflow-wrap: anywhere; }
table.matrix th.corner { width: 180px; }
table.matrix tbody th { text-align: right; padding-right: 8px; vertical-align: middle; overflow-wrap: anywhere; }
td.cell { vertical-align: top; padding: 6px 8px; border-radius: 4px; font-size: 12.5px; border-left-width: 5px; border-left-style: solid; }
td.cell a { color: inherit; font-weight: 600; }
td.none { background: #f6f6f6; color: #b0b0b0; text-align: center; vertical-align: middle; border-radius: 4px; }
.big { font-weight: 700; font-size: 14px; }
.lat, .vc { color: #333; }
.warn { color: #b71c1c; font-weight: 700; }
figure { margin: 18px 0 8px; }
figure svg { max-width: 100%; height: auto; display: block; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; }
dl.scenarios dt { font-weight: 700; margin-top: 10px; }
dl.scenarios dd { margin: 2px 0 0 18px; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; font-size: 12.5px; }
ul.mismatches li { margin: 2px 0; }
table.incidents { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 10px 0; }
table.incidents th, table.incidents td { border-bottom: 1px solid #e0e0e0; padding: 5px 6px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
footer { margin-top: 30px; color: #777; font-size: 12.5px; }
"#,
    );
    for outcome in Outcome::ALL {
        let c = outcome_color(outcome);
        let bg = {
            let mix = |x: u8| (255.0 - (255.0 - x as f64) * 0.16).round() as u8;
            format!("#{:02x}{:02x}{:02x}", mix(c.0), mix(c.1), mix(c.2))
        };
        let _ = writeln!(
            css,
            ".o-{name} {{ background: {bg}; border-left-color: {fg}; }}\n.sw.o-{name} {{ background: {fg}; }}",
            name = outcome.as_str(),
            fg = hex(c),
        );
    }
    css
}

/// A one-line description of what ran.
pub fn headline(s: &Summary) -> String {
    format!(
        "{} scenario(s) × {} scheme(s): {} run(s) in {:.1} s wall; seeds: {}",
        s.scenarios.len(),
        s.schemes.len(),
        s.runs,
        s.wall_s,
        s.seed_policy
    )
}

/// The verdict counts worth showing: only the ones that are not all good.
pub fn verdict_notes(cell: &Cell) -> Vec<String> {
    let v = &cell.stats.verdicts;
    let mut notes = Vec::new();
    if v.mutual_exclusion.violated > 0 {
        notes.push(format!("exclusion ✗ {}", v.mutual_exclusion.violated));
    }
    if v.resource_safety.violated > 0 {
        notes.push(format!("resource ✗ {}", v.resource_safety.violated));
    }
    if v.liveness.stuck > 0 {
        notes.push(format!("stuck {}", v.liveness.stuck));
    }
    if v.fifo_violated > 0 {
        notes.push(format!("FIFO order ✗ {}", v.fifo_violated));
    }
    notes
}

fn cell_html(cell: &Cell) -> String {
    let s = &cell.stats;
    let mut out = String::new();
    let title = format!(
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
    );
    let _ = write!(
        out,
        r#"<td id="{}" class="cell o-{}" title="{}">"#,
        crate::matrix::cell_id(&s.scenario, &s.scheme),
        s.outcome.as_str(),
        esc(&title)
    );
    if s.seeds_run == 0 {
        out.push_str(r#"<div class="big">no finished runs</div></td>"#);
        return out;
    }
    if s.seeds_violating == 0 {
        let _ = write!(out, r#"<div class="big">0/{} violating</div>"#, s.seeds_run);
    } else {
        let _ = write!(
            out,
            r#"<div class="big">{}/{} violating</div>"#,
            s.seeds_violating, s.seeds_run
        );
    }
    if let Some(seed) = s.first_failing_seed {
        match &cell.timeline {
            Some(link) => {
                let _ = write!(
                    out,
                    r#"<div>first failing: <a href="{}">seed {seed}</a></div>"#,
                    esc(link)
                );
            }
            None => {
                let _ = write!(out, "<div>first failing: seed {seed}</div>");
            }
        }
    }
    if s.acquire_ms.runs > 0 {
        let _ = write!(
            out,
            r#"<div class="lat">acquire p50 {} · p99 {} ms</div><div class="lat">longest wait {} ms</div>"#,
            fmt_ms(s.acquire_ms.p50),
            fmt_ms(s.acquire_ms.p99),
            fmt_ms(s.max_wait_ms.max)
        );
    } else {
        out.push_str(r#"<div class="lat">no acquisitions</div>"#);
    }
    let notes = verdict_notes(cell);
    if !notes.is_empty() {
        let _ = write!(out, r#"<div class="vc">{}</div>"#, esc(&notes.join(" · ")));
    }
    if !cell.mismatches.is_empty() {
        let _ = write!(
            out,
            r#"<div class="warn">⚠ {} unexpected</div>"#,
            cell.mismatches.len()
        );
    }
    out.push_str("</td>");
    out
}

fn catalog_html(s: &Summary, out: &mut String) {
    let scenarios: Vec<&ScenarioInfo> = s.catalog_scenarios();
    if scenarios.is_empty() {
        out.push_str("<p>No catalog scenarios in this report.</p>\n");
        return;
    }
    for chunk in scenarios.chunks(MAX_COLUMNS) {
        // Rows: the schemes that ran on at least one scenario of this table.
        let schemes: Vec<&String> = s
            .schemes
            .iter()
            .filter(|scheme| chunk.iter().any(|sc| s.cell(&sc.name, scheme).is_some()))
            .collect();
        out.push_str(
            "<table class=\"matrix\">\n<thead><tr><th class=\"corner\">scheme \\ scenario</th>",
        );
        for sc in chunk {
            let _ = write!(
                out,
                r#"<th title="{}">{}</th>"#,
                esc(&sc.description),
                breakable(&sc.name)
            );
        }
        // Keep columns the same width in every table.
        for _ in chunk.len()..MAX_COLUMNS.min(scenarios.len()) {
            out.push_str("<th></th>");
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for scheme in schemes {
            let _ = write!(out, "<tr><th>{}</th>", breakable(scheme));
            for sc in chunk {
                match s.cell(&sc.name, scheme) {
                    Some(cell) => out.push_str(&cell_html(cell)),
                    None => out.push_str(r#"<td class="none">—</td>"#),
                }
            }
            for _ in chunk.len()..MAX_COLUMNS.min(scenarios.len()) {
                out.push_str("<td></td>");
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
    }
}

/// Makes a plotters SVG scale down with the page.
fn inline_svg(svg: &str) -> String {
    svg.replacen("<svg ", r#"<svg style="max-width:100%;height:auto" "#, 1)
}

fn legend(out: &mut String) {
    out.push_str("<div class=\"legend\">");
    for outcome in Outcome::ALL {
        let _ = write!(
            out,
            r#"<div><span class="sw o-{}"></span>{}</div>"#,
            outcome.as_str(),
            esc(outcome.legend())
        );
    }
    out.push_str("</div>\n");
}

fn header(s: &Summary, out: &mut String) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>locksim — which lock survives what</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
        css()
    );
    out.push_str("<h1>locksim — which lock survives what, and what it costs</h1>\n");
    let _ = writeln!(out, r#"<p class="meta">{}</p>"#, esc(&headline(s)));
    if s.interrupted {
        out.push_str(r#"<p class="alert">Interrupted (Ctrl-C): this report shows only the runs that finished.</p>"#);
        out.push('\n');
    }
    if !s.errors.is_empty() {
        let _ = writeln!(
            out,
            r##"<p class="alert bad">{} run(s) could not be simulated: see <a href="#errors">Errors</a>.</p>"##,
            s.errors.len()
        );
    }
    let mismatches = s.mismatch_count();
    if mismatches > 0 {
        let _ = writeln!(
            out,
            r##"<p class="alert bad">{mismatches} verdict(s) differ from the scenarios' expectations: see <a href="#expectations">Expectations</a>.</p>"##
        );
    }
}

fn fault_matrix(s: &Summary, out: &mut String) {
    if s.matrix_columns().is_empty() {
        return;
    }
    out.push_str("<h2 id=\"matrix\">The matrix: every lock under every fault</h2>\n<p>A row per lock scheme (grouped by how it locks; <span class=\"nolease\">no lease</span>: the key never expires by itself), a column per fault class (grouped by family). Upright headers are worst cases, scripted to strike the first grant: each cell is the seeds that broke something out of the seeds run. <i>Italic</i> headers are random-rate columns (the random nemesis restricted to that family): the share of seeds that broke something, with its 95% Wilson interval below. Colour: the worst outcome; a linked figure opens the first failing seed's timeline; hover for the counts and the column's description. The cost columns are the fault-free column's acquire latency and throughput.</p>\n");
    legend(out);
    crate::matrix::html(s, out);
    out.push_str("<h2 id=\"breaks\">What breaks it</h2>\n<p>Per scheme, the worst cases that broke it on some seed, by outcome, then the random-rate columns in which some seed broke something.</p>\n");
    crate::matrix::breaks_html(s, out);
}

fn debate(s: &Summary, out: &mut String) {
    if s.matrix_columns().is_empty() {
        return;
    }
    out.push_str("<h2 id=\"debate\">The debate, replayed</h2>\n<p>Each claim of Martin Kleppmann’s <i>How to do distributed locking</i> (2016), antirez’s answer <i>Is Redlock safe?</i> (2016), redis.io’s Redlock page and the seed articles, next to the cells that test it and what the runs say (✓: the runs show what the claim predicts on these seeds; ✗: they do not). Claims are paraphrased; quotes are verbatim from the seed articles.</p>\n");
    crate::debate::html(s, out);
}

fn catalog(s: &Summary, out: &mut String) {
    out.push_str("<h2 id=\"catalog\">The catalog</h2>\n<p>Every other scenario: each scheme under the one case its source (or the literature) says breaks it, and the fault-free baselines. A row per lock scheme, a column per scenario. Each cell: seeds that broke something out of seeds run; the first failing seed, linked to its timeline; acquire latency (each seed's p50 and p99, median over the seeds); the longest any client waited for the lock on any seed (starvation, not a liveness failure); which verdicts failed and how often. Hover a cell for every count.</p>\n");
    legend(out);
    catalog_html(s, out);
}

fn charts(charts: &ChartSet, out: &mut String) {
    out.push_str("<h2>Charts</h2>\n");
    for chart in &charts.charts {
        let _ = writeln!(
            out,
            "<figure>\n{}\n<figcaption>{} — also <a href=\"charts/{}\">charts/{}</a></figcaption>\n</figure>",
            inline_svg(&chart.svg),
            esc(chart.title),
            chart.file,
            chart.file
        );
    }
}

fn scenarios(s: &Summary, out: &mut String) {
    out.push_str("<h2>Scenarios</h2>\n<dl class=\"scenarios\">\n");
    for sc in &s.scenarios {
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{}</dd><dd><code>{}</code>, seeds {}",
            esc(&sc.name),
            esc(&sc.description),
            esc(&sc.file),
            esc(&sc.seeds)
        );
        if !sc.source.is_empty() {
            let _ = write!(out, " — source: {}", esc(&sc.source));
        }
        out.push_str("</dd>\n");
    }
    out.push_str("</dl>\n");
}

fn expectations(s: &Summary, out: &mut String) {
    out.push_str("<h2 id=\"expectations\">Expectations</h2>\n");
    if s.mismatch_count() == 0 {
        out.push_str(
            "<p>Every verdict these runs gave matches its scenario's <code>expect</code>.</p>\n",
        );
    } else {
        out.push_str("<ul class=\"mismatches\">\n");
        for cell in &s.cells {
            for m in &cell.mismatches {
                let _ = writeln!(out, "<li>{}</li>", esc(m));
            }
        }
        out.push_str("</ul>\n");
    }
}

fn reproduce(s: &Summary, out: &mut String) {
    let replays: Vec<&Cell> = s.cells.iter().filter(|c| c.replay.is_some()).collect();
    if replays.is_empty() {
        return;
    }
    out.push_str(
        "<h2>Reproduce</h2>\n<p>The first failing seed of each cell, as a command:</p>\n<ul>\n",
    );
    for cell in replays {
        let _ = writeln!(
            out,
            "<li>{} × {}: <code>{}</code></li>",
            esc(&cell.stats.scheme),
            esc(&cell.stats.scenario),
            esc(cell.replay.as_deref().unwrap_or_default())
        );
    }
    out.push_str("</ul>\n");
}

fn errors(s: &Summary, out: &mut String) {
    if s.errors.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"errors\">Errors</h2>\n<ul>\n");
    for e in &s.errors {
        let _ = writeln!(out, "<li>{}</li>", esc(e));
    }
    out.push_str("</ul>\n");
}

/// The whole page: one call per section, in reading order.
pub fn render(s: &Summary, chart_set: &ChartSet) -> String {
    let mut out = String::new();
    header(s, &mut out);
    fault_matrix(s, &mut out);
    debate(s, &mut out);
    catalog(s, &mut out);
    out.push_str(&crate::incidents::html(s));
    charts(chart_set, &mut out);
    scenarios(s, &mut out);
    expectations(s, &mut out);
    reproduce(s, &mut out);
    errors(s, &mut out);
    out.push_str("<footer>Generated by <code>locksim compare</code>. The same numbers are in <code>summary.json</code> and <code>report.md</code> beside this page. Same scenario + same seed ⇒ the same trace: every seed named here replays exactly.</footer>\n</main>\n</body>\n</html>\n");
    out
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
                    incident: None,
                    matrix: None,
                },
                ScenarioInfo {
                    name: "base<line>".into(),
                    file: "scenarios/b.json".into(),
                    description: "no faults".into(),
                    source: String::new(),
                    seeds: "0..9".into(),
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
        // Cells: counts, first failing seed linked to its timeline, latency, colour class.
        assert!(html.contains("1/2 violating"));
        assert!(html.contains(
            r#"first failing: <a href="runs/gc-pause/set-nx-px-lua/seed-0/timeline.svg">seed 0</a>"#
        ));
        assert!(html.contains("acquire p50 4.5 · p99 518 ms"), "{html}");
        assert!(
            html.contains("o-corrupted") && html.contains("o-overlap") && html.contains("o-ok")
        );
        assert!(
            html.contains(r#"<td class="none">—</td>"#),
            "fencing never ran base<line>"
        );
        assert!(html.contains("⚠ 1 unexpected"));
        // Names are escaped; charts are inlined.
        assert!(html.contains("base&lt;line&gt;") && !html.contains("base<line>"));
        assert_eq!(html.matches("<svg ").count(), 3);
        assert!(html.contains("locksim replay x.json --seed 0"));
    }

    #[test]
    fn wide_matrices_split_into_tables_that_fit() {
        let mut s = sample();
        let template = s.scenarios[1].clone();
        for i in 0..(MAX_COLUMNS + 1) {
            let mut sc = template.clone();
            sc.name = format!("extra-{i}");
            s.scenarios.push(sc);
        }
        let html = render(&s, &ChartSet::render(&s));
        assert_eq!(html.matches("<table class=\"matrix\">").count(), 2);
    }
}
