//! What a reader would see wrong, checked by machine (issue 30): in a chart, text that runs into
//! other text or off the canvas, cells that overprint each other, a figure wider than its cell;
//! on the page, in the charts and in the terminal, a count of seeds that differs from
//! `summary.json`. The tests run these on sample reports and on a real `compare` (and
//! `scripts/check-report.sh` on the whole default one).
//!
//! Text extents are estimated with the charts' own [`text_width`] (DejaVu Sans widths, the
//! widest common sans-serif); `scripts/screenshot-report.sh` measures them in Chromium.

use std::collections::BTreeMap;

use crate::charts::text_width;
use crate::html::Count;
use crate::incidents::reported;
use crate::matrix::{cell_id, figure, is_random, ordered_columns, short};
use crate::summary::{Cell, Summary};

/// An axis-aligned box, px.
#[derive(Clone, Debug, PartialEq)]
pub struct Extent {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Extent {
    fn overlaps(&self, other: &Extent, slack: f64) -> bool {
        self.x0 + slack < other.x1
            && other.x0 + slack < self.x1
            && self.y0 + slack < other.y1
            && other.y0 + slack < self.y1
    }

    fn contains(&self, other: &Extent, slack: f64) -> bool {
        other.x0 >= self.x0 - slack
            && other.x1 <= self.x1 + slack
            && other.y0 >= self.y0 - slack
            && other.y1 <= self.y1 + slack
    }

    fn centre(&self) -> (f64, f64) {
        ((self.x0 + self.x1) / 2.0, (self.y0 + self.y1) / 2.0)
    }

    fn of_points(points: &[(f64, f64)]) -> Extent {
        let xs = points.iter().map(|p| p.0);
        let ys = points.iter().map(|p| p.1);
        Extent {
            x0: xs.clone().fold(f64::INFINITY, f64::min),
            x1: xs.fold(f64::NEG_INFINITY, f64::max),
            y0: ys.clone().fold(f64::INFINITY, f64::min),
            y1: ys.fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// A text of a chart: where it is drawn, its estimated extent, and how.
#[derive(Clone, Debug)]
pub struct Label {
    pub text: String,
    /// The anchor point (`x`, `y` attributes).
    pub at: (f64, f64),
    pub anchor: String,
    pub rotated: bool,
    pub extent: Extent,
}

/// A shape of a chart: its extent, and whether it is an opaque filled rectangle (a cell, a
/// bar, a swatch) rather than a translucent shading or a line.
#[derive(Clone, Debug)]
pub struct Shape {
    pub kind: String,
    pub extent: Extent,
    pub opaque_rect: bool,
}

/// An SVG's canvas, texts and shapes.
pub struct Drawing {
    pub width: f64,
    pub height: f64,
    pub labels: Vec<Label>,
    pub shapes: Vec<Shape>,
}

fn number(node: roxmltree::Node, attr: &str) -> f64 {
    node.attribute(attr)
        .and_then(|v| v.trim_end_matches("px").parse().ok())
        .unwrap_or(0.0)
}

fn points(node: roxmltree::Node) -> Vec<(f64, f64)> {
    node.attribute("points")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// `rotate(a, cx, cy)` → (a, cx, cy).
fn rotation(transform: &str) -> Option<(f64, f64, f64)> {
    let inner = transform
        .trim()
        .strip_prefix("rotate(")?
        .strip_suffix(')')?;
    let v: Vec<f64> = inner
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match v.as_slice() {
        [a, cx, cy] => Some((*a, *cx, *cy)),
        [a] => Some((*a, 0.0, 0.0)),
        _ => None,
    }
}

/// `0.76em`, `0.5ex`, `3` → px at `size`.
fn length(text: &str, size: f64) -> f64 {
    let text = text.trim();
    if let Some(v) = text.strip_suffix("em") {
        v.parse::<f64>().unwrap_or(0.0) * size
    } else if let Some(v) = text.strip_suffix("ex") {
        v.parse::<f64>().unwrap_or(0.0) * size * 0.5
    } else {
        text.trim_end_matches("px").parse().unwrap_or(0.0)
    }
}

fn label(node: roxmltree::Node) -> Label {
    let text: String = node
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<String>()
        .trim()
        .to_string();
    let size = number(node, "font-size").max(1.0);
    let (x, y) = (number(node, "x"), number(node, "y"));
    let baseline = y + node.attribute("dy").map_or(0.0, |d| length(d, size));
    let width = text_width(&text, size) as f64;
    let anchor = node.attribute("text-anchor").unwrap_or("start").to_string();
    let x0 = match anchor.as_str() {
        "middle" => x - width / 2.0,
        "end" => x - width,
        _ => x,
    };
    // Ascent and descent of a sans-serif line: 0.76 em above the baseline, 0.24 below.
    let mut extent = Extent {
        x0,
        x1: x0 + width,
        y0: baseline - 0.76 * size,
        y1: baseline + 0.24 * size,
    };
    let rotated = node.attribute("transform").and_then(rotation);
    if let Some((deg, cx, cy)) = rotated {
        let (sin, cos) = deg.to_radians().sin_cos();
        let turn = |(px, py): (f64, f64)| {
            (
                cx + (px - cx) * cos - (py - cy) * sin,
                cy + (px - cx) * sin + (py - cy) * cos,
            )
        };
        extent = Extent::of_points(&[
            turn((extent.x0, extent.y0)),
            turn((extent.x1, extent.y0)),
            turn((extent.x0, extent.y1)),
            turn((extent.x1, extent.y1)),
        ]);
    }
    Label {
        text,
        at: (x, y),
        anchor,
        rotated: rotated.is_some(),
        extent,
    }
}

fn opaque(node: roxmltree::Node) -> bool {
    let alpha = |attr| {
        node.attribute(attr)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(1.0)
    };
    node.attribute("fill").is_some_and(|f| f != "none")
        && alpha("opacity") >= 1.0
        && alpha("fill-opacity") >= 1.0
}

/// Reads a chart.
pub fn parse(svg: &str) -> Result<Drawing, String> {
    let doc = roxmltree::Document::parse(svg).map_err(|e| format!("not well-formed SVG: {e}"))?;
    let root = doc.root_element();
    let mut drawing = Drawing {
        width: number(root, "width"),
        height: number(root, "height"),
        labels: Vec::new(),
        shapes: Vec::new(),
    };
    for node in root.descendants().filter(|n| n.is_element()) {
        let name = node.tag_name().name();
        let extent = match name {
            "text" => {
                drawing.labels.push(label(node));
                continue;
            }
            "rect" => Extent {
                x0: number(node, "x"),
                y0: number(node, "y"),
                x1: number(node, "x") + number(node, "width"),
                y1: number(node, "y") + number(node, "height"),
            },
            "line" => Extent::of_points(&[
                (number(node, "x1"), number(node, "y1")),
                (number(node, "x2"), number(node, "y2")),
            ]),
            "circle" => {
                let (cx, cy, r) = (number(node, "cx"), number(node, "cy"), number(node, "r"));
                Extent::of_points(&[(cx - r, cy - r), (cx + r, cy + r)])
            }
            "polyline" | "polygon" => {
                let pts = points(node);
                if pts.is_empty() {
                    continue;
                }
                Extent::of_points(&pts)
            }
            _ => continue,
        };
        drawing.shapes.push(Shape {
            kind: name.to_string(),
            opaque_rect: name == "rect" && opaque(node),
            extent,
        });
    }
    Ok(drawing)
}

/// Everything wrong with a chart's layout, one sentence each: text or a shape outside the
/// canvas, two texts that overlap, two opaque rectangles (cells, bars, swatches) that overlap,
/// a text centred in an opaque rectangle that does not fit in it.
pub fn svg_problems(svg: &str) -> Result<Vec<String>, String> {
    let d = parse(svg)?;
    let canvas = Extent {
        x0: 0.0,
        y0: 0.0,
        x1: d.width,
        y1: d.height,
    };
    let mut problems = Vec::new();
    for l in &d.labels {
        if !canvas.contains(&l.extent, 0.5) {
            problems.push(format!(
                "text {:?} at {:?} runs off the {}×{} canvas ({:.0}..{:.0} × {:.0}..{:.0})",
                l.text, l.at, d.width, d.height, l.extent.x0, l.extent.x1, l.extent.y0, l.extent.y1
            ));
        }
    }
    for s in &d.shapes {
        if !canvas.contains(&s.extent, 0.5) {
            problems.push(format!(
                "{} at {:.0}..{:.0} × {:.0}..{:.0} is outside the {}×{} canvas",
                s.kind, s.extent.x0, s.extent.x1, s.extent.y0, s.extent.y1, d.width, d.height
            ));
        }
    }
    // Sweep by x so that big charts stay cheap.
    let mut labels: Vec<&Label> = d.labels.iter().filter(|l| !l.text.is_empty()).collect();
    labels.sort_by(|a, b| a.extent.x0.total_cmp(&b.extent.x0));
    for (i, a) in labels.iter().enumerate() {
        for b in labels[i + 1..]
            .iter()
            .take_while(|b| b.extent.x0 < a.extent.x1)
        {
            if a.extent.overlaps(&b.extent, 0.5) {
                problems.push(format!(
                    "text {:?} at {:?} overlaps text {:?} at {:?}",
                    a.text, a.at, b.text, b.at
                ));
            }
        }
    }
    let cells: Vec<&Shape> = d
        .shapes
        .iter()
        .filter(|s| s.opaque_rect && !s.extent.contains(&canvas, 0.5))
        .collect();
    for (i, a) in cells.iter().enumerate() {
        for b in &cells[i + 1..] {
            if a.extent.overlaps(&b.extent, 0.5) {
                problems.push(format!(
                    "rectangles {:?} and {:?} overlap",
                    a.extent, b.extent
                ));
            }
        }
    }
    for l in &d.labels {
        let (cx, cy) = l.extent.centre();
        if let Some(cell) = cells.iter().find(|c| {
            c.extent.x0 <= cx && cx <= c.extent.x1 && c.extent.y0 <= cy && cy <= c.extent.y1
        }) && !cell.extent.contains(&l.extent, 0.5)
        {
            problems.push(format!(
                "text {:?} is wider or taller than the cell it is drawn in ({:?})",
                l.text, cell.extent
            ));
        }
    }
    Ok(problems)
}

/// The figures of a heat map: (row label, column label, figure), found by position — a figure
/// is centred under its rotated column label and level with its right-aligned row label.
pub fn heat_map_figures(svg: &str) -> Result<Vec<(String, String, String)>, String> {
    let d = parse(svg)?;
    let columns: Vec<&Label> = d.labels.iter().filter(|l| l.rotated).collect();
    let rows: Vec<&Label> = d
        .labels
        .iter()
        .filter(|l| !l.rotated && l.anchor == "end")
        .collect();
    let mut out = Vec::new();
    for f in d
        .labels
        .iter()
        .filter(|l| !l.rotated && l.anchor == "middle")
    {
        let column = columns
            .iter()
            .filter(|c| (c.at.0 - f.at.0).abs() <= 1.5 && c.at.1 < f.at.1)
            .max_by(|a, b| a.at.1.total_cmp(&b.at.1));
        let row = rows
            .iter()
            .filter(|r| (r.at.1 - f.at.1).abs() <= 1.5 && r.at.0 < f.at.0)
            .max_by(|a, b| a.at.0.total_cmp(&b.at.0));
        match (row, column) {
            (Some(r), Some(c)) => out.push((r.text.clone(), c.text.clone(), f.text.clone())),
            _ => {
                return Err(format!(
                    "figure {:?} at {:?} has no row or column label",
                    f.text, f.at
                ));
            }
        }
    }
    Ok(out)
}

/// What a count of `what` on the page must say for `cell`.
fn expected(s: &Summary, cell: &Cell, what: Count) -> String {
    let st = &cell.stats;
    let of = |k: u64| format!("{k}/{}", st.seeds_run);
    match what {
        Count::Violating => {
            let random = s
                .scenarios
                .iter()
                .find(|sc| sc.name == st.scenario)
                .is_some_and(is_random);
            figure(cell, random).0
        }
        Count::Reported => of(reported(cell)),
        Count::Unsafe => of(st.verdicts.unsafe_runs),
        Count::Lost => of(st.verdicts.resource_safety.violated),
        Count::Stuck => of(st.verdicts.liveness.stuck),
    }
}

fn cells_by_id(s: &Summary) -> BTreeMap<String, &Cell> {
    s.cells
        .iter()
        .map(|c| (cell_id(&c.stats.scenario, &c.stats.scheme), c))
        .collect()
}

/// Is `text` a count of seeds (`3/10`)?
fn is_fraction(text: &str) -> bool {
    let text = text.trim();
    text.split_once('/').is_some_and(|(k, n)| {
        !k.is_empty()
            && !n.is_empty()
            && k.chars().all(|c| c.is_ascii_digit())
            && n.chars().all(|c| c.is_ascii_digit())
    })
}

/// Every `k/n` inside a longer text (`… 3/10 seeds …`).
fn fractions_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "()[],;:".contains(c))
        .filter(|w| is_fraction(w))
        .map(String::from)
        .collect()
}

/// Every count of seeds on the page, checked against `summary.json`: each marked count
/// (`data-cell`, `data-count`) must say what its cell's numbers say, and no `k/n` may stand on
/// the page outside a marked count (outside the inline charts, which [`heat_map_problems`]
/// checks). Returns the problems and how many counts were checked.
pub fn page_problems(html: &str, s: &Summary) -> (Vec<String>, usize) {
    let cells = cells_by_id(s);
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut rest = html;
    let mut skip_until: Option<&str> = None;
    let mut marked: Option<(String, String)> = None;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        let close = rest[open..].find('>').map_or(rest.len(), |c| open + c + 1);
        let tag = &rest[open..close];
        rest = &rest[close..];
        if skip_until.is_none() {
            match marked.take() {
                Some((id, what)) => {
                    checked += 1;
                    let Some(cell) = cells.get(&id) else {
                        problems.push(format!("a count of {what} names no cell: {id}"));
                        continue;
                    };
                    let want = Count::parse(&what)
                        .map(|w| expected(s, cell, w))
                        .unwrap_or_default();
                    if text.trim() != want {
                        problems.push(format!(
                            "{} × {}: the page says {what} {:?}, summary.json {want:?}",
                            cell.stats.scenario,
                            cell.stats.scheme,
                            text.trim()
                        ));
                    }
                }
                None => {
                    for f in fractions_in(text) {
                        problems.push(format!("an unmarked count {f:?} in {:?}", text.trim()));
                    }
                }
            }
        }
        let name: String = tag
            .trim_start_matches('<')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '/')
            .collect();
        if let Some(end) = skip_until {
            if name == end {
                skip_until = None;
            }
            continue;
        }
        match name.as_str() {
            "svg" => skip_until = Some("/svg"),
            "style" => skip_until = Some("/style"),
            "span" => {
                let attr = |key: &str| {
                    let at = tag.find(&format!(" {key}=\""))? + key.len() + 3;
                    tag[at..].split('"').next().map(String::from)
                };
                if let (Some(id), Some(what)) = (attr("data-cell"), attr("data-count")) {
                    marked = Some((id, what));
                }
            }
            _ => {}
        }
    }
    (problems, checked)
}

/// A heat map's figures against `summary.json`: the fault matrix's (`matrix: true`, row
/// labels may say "(no lease)", random columns a share) or the catalog's. Every cell in scope
/// must be drawn exactly once.
pub fn heat_map_problems(svg: &str, s: &Summary, matrix: bool) -> Result<Vec<String>, String> {
    let figures = heat_map_figures(svg)?;
    let mut problems = Vec::new();
    let scenarios: Vec<_> = if matrix {
        ordered_columns(s)
    } else {
        s.catalog_scenarios()
    };
    let mut expected: BTreeMap<(String, String), String> = BTreeMap::new();
    for sc in &scenarios {
        let column = if matrix {
            format!("{}{}", if is_random(sc) { "~ " } else { "" }, short(sc))
        } else {
            sc.name.clone()
        };
        for cell in s.cells.iter().filter(|c| c.stats.scenario == sc.name) {
            let row = match s.matrix_rows.iter().find(|r| r.scheme == cell.stats.scheme) {
                Some(r) if matrix && !r.lease => format!("{} (no lease)", r.scheme),
                _ => cell.stats.scheme.clone(),
            };
            let figure = if matrix {
                figure(cell, is_random(sc)).0
            } else {
                format!("{}/{}", cell.stats.seeds_violating, cell.stats.seeds_run)
            };
            expected.insert((row, column.clone()), figure);
        }
    }
    let mut seen = BTreeMap::new();
    for (row, column, figure) in figures {
        *seen.entry((row.clone(), column.clone())).or_insert(0) += 1;
        match expected.get(&(row.clone(), column.clone())) {
            Some(want) if *want == figure => {}
            Some(want) => problems.push(format!(
                "{row} × {column}: the chart says {figure:?}, summary.json {want:?}"
            )),
            None => problems.push(format!(
                "{row} × {column}: the chart draws {figure:?} for a cell the report does not have"
            )),
        }
    }
    for key in expected.keys() {
        match seen.get(key) {
            Some(1) => {}
            Some(n) => problems.push(format!("{} × {}: drawn {n} times", key.0, key.1)),
            None => problems.push(format!("{} × {}: not drawn", key.0, key.1)),
        }
    }
    Ok(problems)
}

/// `compare`'s terminal lines against `summary.json`: each cell's line
/// (`  scenario × scheme  k/n violating outcome …`) says its cell's seeds violating.
pub fn terminal_problems(text: &str, s: &Summary) -> Vec<String> {
    let mut problems = Vec::new();
    for cell in &s.cells {
        let st = &cell.stats;
        let name = format!("  {} × {} ", st.scenario, st.scheme);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(&name)).collect();
        let [line] = lines.as_slice() else {
            problems.push(format!(
                "{} × {}: {} terminal lines",
                st.scenario,
                st.scheme,
                lines.len()
            ));
            continue;
        };
        let words: Vec<&str> = line[name.len()..].split_whitespace().collect();
        let shown = match words.as_slice() {
            [k, v, ..] if k.ends_with('/') => format!("{k}{v}"),
            [kn, ..] => kn.to_string(),
            [] => String::new(),
        };
        let want = format!("{}/{}", st.seeds_violating, st.seeds_run);
        if shown != want {
            problems.push(format!(
                "{} × {}: the terminal says {shown:?}, summary.json {want:?}",
                st.scenario, st.scheme
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = r##"<svg width="200" height="100" viewBox="0 0 200 100" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="200" height="100" opacity="1" fill="#FFFFFF" stroke="none"/>
<rect x="50" y="50" width="30" height="20" opacity="1" fill="#FF0000" stroke="none"/>
<text x="65" y="60" dy="0.5ex" text-anchor="middle" font-family="sans-serif" font-size="10" opacity="1" fill="#000">
1/2
</text>
<text x="45" y="60" dy="0.5ex" text-anchor="end" font-family="sans-serif" font-size="12" opacity="1" fill="#000">
row
</text>
<text x="65" y="44" dy="0.5ex" text-anchor="start" font-family="sans-serif" font-size="12" opacity="1" fill="#000" transform="rotate(270, 65, 44)">
col
</text>
</svg>"##;

    #[test]
    fn a_clean_chart_has_no_problems_and_its_figures_are_found() {
        assert_eq!(svg_problems(SVG).unwrap(), Vec::<String>::new());
        assert_eq!(
            heat_map_figures(SVG).unwrap(),
            [("row".into(), "col".into(), "1/2".into())]
        );
    }

    #[test]
    fn overprinted_and_clipped_text_is_found() {
        // A second label on top of the row label, one running off the right edge, a cell
        // overlapping another, and a figure wider than its cell.
        let bad = SVG.replace(
            "</svg>",
            r##"<text x="40" y="60" text-anchor="end" font-size="12">other</text>
<text x="190" y="20" text-anchor="start" font-size="12">far too long</text>
<rect x="70" y="55" width="30" height="20" opacity="1" fill="#00FF00"/>
<rect x="10" y="80" width="10" height="10" opacity="1" fill="#0000FF"/>
<text x="15" y="85" dy="0.5ex" text-anchor="middle" font-size="10">100/100</text>
</svg>"##,
        );
        let problems = svg_problems(&bad).unwrap().join("\n");
        assert!(
            problems.contains(r#""row" at (45.0, 60.0) overlaps text "other""#)
                || problems.contains(r#""other" at (40.0, 60.0) overlaps text "row""#),
            "{problems}"
        );
        assert!(
            problems.contains(r#"text "far too long" at (190.0, 20.0) runs off"#),
            "{problems}"
        );
        assert!(problems.contains("rectangles"), "{problems}");
        assert!(
            problems.contains(r#"text "100/100" is wider"#),
            "{problems}"
        );
    }

    #[test]
    fn rotated_text_is_measured_upright() {
        let d = parse(SVG).unwrap();
        let col = d.labels.iter().find(|l| l.rotated).unwrap();
        // "col" at 12 px reads upwards from y = 44: its extent is narrow and tall.
        assert!(
            col.extent.y1 <= 44.5 && col.extent.y0 < 30.0,
            "{:?}",
            col.extent
        );
        assert!(col.extent.x1 - col.extent.x0 <= 13.0, "{:?}", col.extent);
    }

    #[test]
    fn counts_on_the_page_are_checked_against_the_summary() {
        let s = crate::html::tests::sample();
        let page = crate::html::render(&s, &crate::charts::ChartSet::render(&s));
        let (problems, checked) = page_problems(&page, &s);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(checked >= 3, "{checked}");
        let wrong = page.replacen(
            r#"data-count="violating">1/2<"#,
            r#"data-count="violating">2/2<"#,
            1,
        );
        assert_eq!(page_problems(&wrong, &s).0.len(), 1);
        let unmarked = page.replacen("<footer>", "<footer>3/10 ", 1);
        assert!(page_problems(&unmarked, &s).0[0].contains("an unmarked count \"3/10\""));
        let terminal = "  gc-pause × set-nx-px-lua  1/2   violating\n  gc-pause × fencing  1/1 violating\n  base<line> × set-nx-px-lua    0/1   violating\n";
        assert!(terminal_problems(terminal, &s).is_empty());
        assert_eq!(
            terminal_problems(&terminal.replace("1/1", "0/1"), &s).len(),
            1
        );
    }
}
