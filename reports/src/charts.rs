//! The comparison charts, as SVG drawn with plotters: the fault matrix and the catalog's
//! violation matrix as heat maps, and what the locks cost without faults — one client alone,
//! then several contending (throughput and waits). Layout is computed here in pixels from
//! estimated text widths ([`text_width`]), so that no label runs into another or off the
//! canvas (`audit` checks every chart); plotters draws the shapes and the text.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::matrix::{cost_columns, figure, is_random, ordered_columns, short};
use crate::summary::{Cell, Outcome, ScenarioInfo, Summary, fmt_ms};

/// Width of every chart, in px: fits a 1280 px page.
pub const WIDTH: u32 = 1180;

/// The colour of each outcome (the HTML uses the same, as hex).
pub fn outcome_color(outcome: Outcome) -> RGBColor {
    match outcome {
        Outcome::Ok => RGBColor(46, 125, 50),
        Outcome::Unfair => RGBColor(106, 27, 154),
        Outcome::Stuck => RGBColor(191, 144, 0),
        Outcome::Overlap => RGBColor(230, 108, 0),
        Outcome::Corrupted => RGBColor(198, 40, 40),
        Outcome::NoRuns => RGBColor(150, 150, 150),
    }
}

pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// `c` mixed with white: `share` 1 = `c`, 0 = white.
pub fn tint(c: RGBColor, share: f64) -> RGBColor {
    let mix = |x: u8| (255.0 - (255.0 - x as f64) * share).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// The advance width of one character in em, from DejaVu Sans (Debian's default sans-serif,
/// `fonts-dejavu-core`, `DejaVuSans.ttf` advance widths / 2048), rounded up: most other
/// sans-serif fonts are narrower, so a layout that fits these widths fits theirs.
fn char_em(c: char) -> f64 {
    match c {
        'i' | 'j' | 'l' | '\'' | '|' | '.' | ',' | ':' | ';' | '!' => 0.29,
        ' ' => 0.33,
        'f' | 't' | '/' | '(' | ')' | '[' | ']' | '-' | 'I' | '`' => 0.40,
        'r' => 0.42,
        's' | 'z' | 'c' | 'J' => 0.56,
        'm' | 'M' | '%' | 'W' | '@' => 1.0,
        'w' => 0.82,
        '0'..='9' | 'a'..='z' | '_' | '#' | '$' | '?' | '*' | '^' => 0.64,
        'A'..='Z' => 0.79,
        '·' | '…' => 0.5,
        c if c.is_ascii() => 0.84,
        // Arrows, ×, ≥, CJK and the rest: at most one em.
        _ => 1.0,
    }
}

/// Estimated width of `text` at `size` px in a sans-serif font (see [`char_em`]).
pub fn text_width(text: &str, size: f64) -> u32 {
    (text.chars().map(char_em).sum::<f64>() * size).ceil() as u32
}

const GRID: RGBColor = RGBColor(225, 225, 225);
const INK: RGBColor = RGBColor(33, 33, 33);
const MUTED: RGBColor = RGBColor(110, 110, 110);
const EMPTY: RGBColor = RGBColor(246, 246, 246);

/// A plotters SVG drawing area, in pixels.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
pub(crate) type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// plotters' SVG backend writes font sizes divided by 1.24: this undoes it, so `size` is px.
pub const FONT_SCALE: f64 = 1.24;

/// Text of `size` px at (x, y), anchored as `pos` says.
pub(crate) fn text(
    area: &Area,
    s: &str,
    (x, y): (i32, i32),
    size: f64,
    color: &RGBColor,
    pos: Pos,
) -> DrawResult {
    let style = ("sans-serif", size * FONT_SCALE)
        .into_font()
        .color(color)
        .pos(pos);
    area.draw(&Text::new(s.to_string(), (x, y), style))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Text turned to read upwards, starting at (x, y) and centred on x.
fn upright(area: &Area, s: &str, (x, y): (i32, i32), size: f64, color: &RGBColor) -> DrawResult {
    let style = ("sans-serif", size * FONT_SCALE)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(color)
        .pos(Pos::new(HPos::Left, VPos::Center));
    area.draw(&Text::new(s.to_string(), (x, y), style))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A rectangle from one corner to the other.
pub(crate) fn rect(
    area: &Area,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
    style: ShapeStyle,
) -> DrawResult {
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], style))
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn line(area: &Area, from: (i32, i32), to: (i32, i32), style: ShapeStyle) -> DrawResult {
    area.draw(&PathElement::new(vec![from, to], style))
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn render(size: (u32, u32), draw: impl FnOnce(&Area) -> DrawResult) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        // Drawing into a String cannot fail for I/O reasons: an error leaves a partial picture.
        let _ = root.fill(&WHITE);
        let _ = draw(&root);
        let _ = root.present();
    }
    svg
}

/// The outcome colours, one a line, from `top`; then a line on the shades. Its height.
fn outcome_legend(area: &Area, top: i32) -> DrawResult {
    for (i, outcome) in Outcome::ALL.iter().enumerate() {
        let (x, y) = (12, top + i as i32 * 18);
        rect(
            area,
            (x, y),
            (x + 14, y + 12),
            tint(outcome_color(*outcome), 0.8).filled(),
        )?;
        text(
            area,
            outcome.legend(),
            (x + 20, y + 6),
            12.0,
            &INK,
            Pos::new(HPos::Left, VPos::Center),
        )?;
    }
    text(
        area,
        SHADE_NOTE,
        (12, top + Outcome::ALL.len() as i32 * 18 + 6),
        12.0,
        &MUTED,
        Pos::new(HPos::Left, VPos::Center),
    )
}

const SHADE_NOTE: &str = "The stronger the colour, the larger the share of seeds that broke something; grey: the scheme does not run there.";

fn legend_height() -> u32 {
    18 * (Outcome::ALL.len() as u32 + 1) + 8
}

/// The cell colour: the outcome's, as strong as the share of seeds that broke something.
fn cell_fill(stats: &crate::summary::CellStats) -> (RGBColor, bool) {
    let share = match stats.outcome {
        Outcome::Ok | Outcome::NoRuns => 0.35,
        _ => 0.3 + 0.7 * stats.violating_share(),
    };
    (tint(outcome_color(stats.outcome), share), share > 0.6)
}

/// A heat map: rows (optionally grouped under headings), columns (optionally separated by
/// family), a figure in each cell that ran. Columns that do not fit the width go into further
/// panels below, each with only the rows that have a cell in its columns.
struct HeatMap<'a> {
    title: String,
    rows: Vec<(String, String)>,
    /// (label, family, scenario) per column.
    columns: Vec<(String, String, &'a ScenarioInfo)>,
    /// The cell of a row (by index) and a column's scenario, and its figure.
    cell: &'a CellOf<'a>,
}

/// Finds the cell of a heat-map row (by index) in a column's scenario, with its figure.
type CellOf<'a> = dyn Fn(usize, &ScenarioInfo) -> Option<(&'a Cell, String)> + 'a;

const TITLE_H: u32 = 40;
const CELL_H: u32 = 22;
const GROUP_H: u32 = 20;
const PANEL_GAP: u32 = 24;
const MARGIN: u32 = 12;

impl HeatMap<'_> {
    fn render(&self) -> String {
        let row_size = 12.0;
        let head_size = 11.5;
        let fig_size = 10.5;
        let label_w = self
            .rows
            .iter()
            .map(|(label, _)| text_width(label, row_size))
            .chain(self.rows.iter().map(|(_, g)| text_width(g, 11.5)))
            .max()
            .unwrap_or(60)
            .max(60)
            + MARGIN
            + 10;
        // Room for the widest figure, and for the column label's line height.
        let widest = self
            .rows
            .iter()
            .enumerate()
            .flat_map(|(r, _)| self.columns.iter().map(move |c| (r, c.2)))
            .filter_map(|(r, sc)| (self.cell)(r, sc))
            .map(|(_, f)| text_width(&f, fig_size))
            .max()
            .unwrap_or(20);
        let cell_w = (widest + 8).max(head_size as u32 + 10);
        let per_panel = ((WIDTH - label_w - MARGIN) / cell_w).max(1) as usize;
        let panels: Vec<&[(String, String, &ScenarioInfo)]> =
            self.columns.chunks(per_panel).collect();
        // Each panel: its rows (those with a cell in its columns) and its header height.
        let layout: Vec<(Vec<usize>, u32)> = panels
            .iter()
            .map(|cols| {
                let rows: Vec<usize> = (0..self.rows.len())
                    .filter(|&r| cols.iter().any(|c| (self.cell)(r, c.2).is_some()))
                    .collect();
                let header = cols
                    .iter()
                    .map(|c| text_width(&c.0, head_size))
                    .max()
                    .unwrap_or(40)
                    + 10;
                (rows, header)
            })
            .collect();
        let groups_in = |rows: &[usize]| {
            rows.iter()
                .enumerate()
                .filter(|(i, r)| {
                    !self.rows[**r].1.is_empty()
                        && (*i == 0 || self.rows[rows[i - 1]].1 != self.rows[**r].1)
                })
                .count() as u32
        };
        let panel_h = |(rows, header): &(Vec<usize>, u32)| {
            header + rows.len() as u32 * CELL_H + groups_in(rows) * GROUP_H
        };
        let height = TITLE_H
            + layout.iter().map(panel_h).sum::<u32>()
            + PANEL_GAP * layout.len().saturating_sub(1) as u32
            + 16
            + legend_height();
        let width = (label_w + per_panel.min(self.columns.len().max(1)) as u32 * cell_w + MARGIN)
            .max(text_width(&self.title, 16.0) + 2 * MARGIN)
            .max(text_width(SHADE_NOTE, 12.0) + 2 * MARGIN)
            .min(WIDTH);
        render((width, height), |area| {
            text(
                area,
                &self.title,
                (MARGIN as i32, 10),
                16.0,
                &INK,
                Pos::new(HPos::Left, VPos::Top),
            )?;
            let mut top = TITLE_H as i32;
            for (cols, (rows, header)) in panels.iter().zip(&layout) {
                let grid_top = top + *header as i32;
                let grid_h = panel_h(&(rows.clone(), *header)) as i32 - *header as i32;
                for (c, (label, family, _)) in cols.iter().enumerate() {
                    let x = (label_w + c as u32 * cell_w) as i32;
                    if c > 0 && *family != cols[c - 1].1 {
                        line(
                            area,
                            (x - 1, grid_top - 4),
                            (x - 1, grid_top + grid_h),
                            MUTED.stroke_width(1),
                        )?;
                    }
                    upright(
                        area,
                        label,
                        (x + cell_w as i32 / 2, grid_top - 6),
                        head_size,
                        &INK,
                    )?;
                }
                let mut y = grid_top;
                for (i, &r) in rows.iter().enumerate() {
                    let (label, group) = &self.rows[r];
                    if !group.is_empty() && (i == 0 || self.rows[rows[i - 1]].1 != *group) {
                        text(
                            area,
                            group,
                            (MARGIN as i32, y + GROUP_H as i32 / 2 + 2),
                            11.5,
                            &MUTED,
                            Pos::new(HPos::Left, VPos::Center),
                        )?;
                        y += GROUP_H as i32;
                    }
                    text(
                        area,
                        label,
                        (label_w as i32 - 8, y + CELL_H as i32 / 2),
                        row_size,
                        &INK,
                        Pos::new(HPos::Right, VPos::Center),
                    )?;
                    for (c, (_, _, sc)) in cols.iter().enumerate() {
                        let x = (label_w + c as u32 * cell_w) as i32;
                        let (x1, y1) = (x + cell_w as i32 - 2, y + CELL_H as i32 - 2);
                        let Some((cell, figure)) = (self.cell)(r, sc) else {
                            rect(area, (x, y), (x1, y1), EMPTY.filled())?;
                            continue;
                        };
                        let (fill, dark) = cell_fill(&cell.stats);
                        rect(area, (x, y), (x1, y1), fill.filled())?;
                        text(
                            area,
                            &figure,
                            ((x + x1) / 2, (y + y1) / 2),
                            fig_size,
                            if dark { &WHITE } else { &INK },
                            Pos::new(HPos::Center, VPos::Center),
                        )?;
                    }
                    y += CELL_H as i32;
                }
                top = y + PANEL_GAP as i32;
            }
            outcome_legend(area, top - PANEL_GAP as i32 + 16)
        })
    }
}

/// The catalog's violation matrix as a heat map: a row per scheme, a column per scenario that
/// is not a matrix column (the catalog, the incidents, the shrunk regressions), each cell
/// coloured by its worst outcome, as strong as the share of seeds that broke something, and
/// labelled `violating/run`.
pub fn heatmap(summary: &Summary) -> String {
    let scenarios = summary.catalog_scenarios();
    let schemes: Vec<&String> = summary
        .schemes
        .iter()
        .filter(|scheme| {
            scenarios
                .iter()
                .any(|sc| summary.cell(&sc.name, scheme).is_some())
        })
        .collect();
    let cell = |r: usize, sc: &ScenarioInfo| {
        summary.cell(&sc.name, schemes[r]).map(|c| {
            let figure = format!("{}/{}", c.stats.seeds_violating, c.stats.seeds_run);
            (c, figure)
        })
    };
    HeatMap {
        title:
            "Violation matrix (catalog, incidents, shrunk): seeds that broke something / seeds run"
                .into(),
        rows: schemes
            .iter()
            .map(|s| (s.to_string(), String::new()))
            .collect(),
        columns: scenarios
            .iter()
            .map(|sc| {
                let folder = sc.file.rsplit_once('/').map_or("", |(d, _)| d);
                (sc.name.clone(), folder.to_string(), *sc)
            })
            .collect(),
        cell: &cell,
    }
    .render()
}

/// The fault matrix as a heat map (the picture the README shows): a row per scheme, grouped by
/// family, a column per fault class, grouped by fault family; worst-case cells say
/// `violating/run`, random-rate cells (headers marked `~`) the share of seeds.
pub fn matrix_heatmap(summary: &Summary) -> String {
    let columns = ordered_columns(summary);
    let rows = &summary.matrix_rows;
    let cell = |r: usize, sc: &ScenarioInfo| {
        summary
            .cell(&sc.name, &rows[r].scheme)
            .map(|c| (c, figure(c, is_random(sc)).0))
    };
    HeatMap {
        title:
            "Which lock survives what: seeds that broke something (~ random faults: share of seeds)"
                .into(),
        rows: rows
            .iter()
            .map(|r| {
                let label = if r.lease {
                    r.scheme.clone()
                } else {
                    format!("{} (no lease)", r.scheme)
                };
                (label, r.family.clone())
            })
            .collect(),
        columns: columns
            .iter()
            .map(|c| {
                let mark = if is_random(c) { "~ " } else { "" };
                (
                    format!("{mark}{}", short(c)),
                    crate::matrix::family(c).to_string(),
                    *c,
                )
            })
            .collect(),
        cell: &cell,
    }
    .render()
}

/// One row of a horizontal bar chart: a label and one value per series.
struct Row {
    label: String,
    values: Vec<f64>,
}

/// A horizontal bar chart, one group of bars per row; `log` for a log₁₀ axis (zeros are not
/// drawn on it).
fn hbars(
    title: &str,
    subtitle: &str,
    unit: &str,
    series: &[(&str, RGBColor)],
    rows: &[Row],
    log: bool,
) -> String {
    let label_w = rows
        .iter()
        .map(|r| text_width(&r.label, 13.0))
        .max()
        .unwrap_or(60)
        .max(60)
        + 16;
    let bar_h = 13;
    let row_h = bar_h * series.len() as u32 + 12;
    let top = 74;
    let axis_h = 44;
    let height = top + row_h * rows.len().max(1) as u32 + axis_h;
    let (x0, x1) = (label_w as i32, WIDTH as i32 - 70);
    let max = rows
        .iter()
        .flat_map(|r| r.values.iter().copied())
        .fold(0.0, f64::max);
    let positive_min = rows
        .iter()
        .flat_map(|r| r.values.iter().copied())
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    // The axis: (lo, hi) and its ticks.
    let (lo, hi, ticks): (f64, f64, Vec<f64>) = if log {
        let lo_exp = if positive_min.is_finite() {
            positive_min.log10().floor() as i32
        } else {
            0
        };
        // Up to a 1-2-5 step above the largest value, with a tick at every power of ten.
        let hi = nice_ceiling(max.max(10f64.powi(lo_exp + 1)));
        let mut ticks: Vec<f64> = (lo_exp..)
            .map(|e| 10f64.powi(e))
            .take_while(|t| *t <= hi)
            .collect();
        if ticks.last().is_some_and(|t| *t < hi) {
            ticks.push(hi);
        }
        (10f64.powi(lo_exp), hi, ticks)
    } else {
        let hi = nice_ceiling(max.max(1.0));
        let step = hi / 5.0;
        (0.0, hi, (0..=5).map(|i| i as f64 * step).collect())
    };
    let x_of = |v: f64| -> i32 {
        let f = if log {
            (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            (v - lo) / (hi - lo)
        };
        x0 + ((x1 - x0) as f64 * f.clamp(0.0, 1.0)).round() as i32
    };
    render((WIDTH, height), |area| {
        text(
            area,
            title,
            (12, 10),
            17.0,
            &INK,
            Pos::new(HPos::Left, VPos::Top),
        )?;
        text(
            area,
            subtitle,
            (12, 32),
            12.0,
            &MUTED,
            Pos::new(HPos::Left, VPos::Top),
        )?;
        // Legend.
        let mut lx = x0;
        for (name, color) in series {
            rect(area, (lx, 54), (lx + 14, 66), color.filled())?;
            text(
                area,
                name,
                (lx + 20, 60),
                12.0,
                &INK,
                Pos::new(HPos::Left, VPos::Center),
            )?;
            lx += 30 + text_width(name, 12.0) as i32;
        }
        let plot_top = top as i32;
        let plot_bottom = plot_top + (row_h * rows.len().max(1) as u32) as i32;
        for &t in &ticks {
            let x = x_of(t);
            area.draw(&PathElement::new(
                vec![(x, plot_top), (x, plot_bottom)],
                GRID.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?;
            text(
                area,
                &fmt_tick(t),
                (x, plot_bottom + 6),
                11.0,
                &MUTED,
                Pos::new(HPos::Center, VPos::Top),
            )?;
        }
        text(
            area,
            unit,
            ((x0 + x1) / 2, plot_bottom + 24),
            12.0,
            &INK,
            Pos::new(HPos::Center, VPos::Top),
        )?;
        for (r, row) in rows.iter().enumerate() {
            let y = plot_top + (r as u32 * row_h) as i32 + 6;
            text(
                area,
                &row.label,
                (x0 - 8, y + (row_h as i32 - 12) / 2),
                13.0,
                &INK,
                Pos::new(HPos::Right, VPos::Center),
            )?;
            for (i, ((_, color), &v)) in series.iter().zip(&row.values).enumerate() {
                let by = y + (i as u32 * bar_h) as i32;
                if v <= 0.0 && log {
                    continue;
                }
                let end = x_of(v).max(x0 + 1);
                rect(area, (x0, by), (end, by + bar_h as i32 - 2), color.filled())?;
                text(
                    area,
                    &fmt_ms(v),
                    (end + 4, by + bar_h as i32 / 2 - 1),
                    10.0,
                    &INK,
                    Pos::new(HPos::Left, VPos::Center),
                )?;
            }
        }
        area.draw(&PathElement::new(
            vec![(x0, plot_top), (x0, plot_bottom)],
            INK.stroke_width(1),
        ))
        .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// 1, 2 or 5 times a power of ten, at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|x| *x >= v)
        .unwrap_or(10.0 * p)
}

fn fmt_tick(v: f64) -> String {
    if v >= 1.0 || v == 0.0 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v}")
    }
}

/// The rows of a cost chart: the matrix rows that ran in `column`, or — in a report without
/// cost columns — every cell, labelled `scheme × scenario`.
fn cost_rows(
    summary: &Summary,
    column: Option<&ScenarioInfo>,
    values: impl Fn(&Cell) -> Vec<f64>,
) -> Vec<Row> {
    match column {
        Some(col) => summary
            .matrix_rows
            .iter()
            .filter_map(|r| summary.cell(&col.name, &r.scheme))
            .filter(|c| c.stats.acquire_ms.runs > 0)
            .map(|c| Row {
                label: c.stats.scheme.clone(),
                values: values(c),
            })
            .collect(),
        None => summary
            .cells
            .iter()
            .filter(|c| c.stats.acquire_ms.runs > 0)
            .map(|c| Row {
                label: format!("{} × {}", c.stats.scheme, c.stats.scenario),
                values: values(c),
            })
            .collect(),
    }
}

const P50: RGBColor = RGBColor(158, 202, 225);
const P99: RGBColor = RGBColor(8, 69, 148);
const LONGEST: RGBColor = RGBColor(120, 60, 0);

/// The cost charts: one client alone (acquire latency), then contention (throughput, waits).
/// Without the matrix's fault-free columns, one chart of each cell's latency and throughput.
fn cost_charts(summary: &Summary) -> Vec<Chart> {
    let cost = cost_columns(summary);
    let mut charts = Vec::new();
    let has_matrix = !summary.matrix_columns().is_empty();
    if let Some(col) = cost.uncontended {
        charts.push(Chart {
            file: "cost-uncontended.svg",
            caption: "Uncontended: acquire latency of one client alone, no faults",
            group: Group::Cost,
            svg: hbars(
                "Uncontended: what one acquisition costs (one client, no faults)",
                &format!(
                    "{}: each seed's acquire p50 and p99, median over the seeds (log scale)",
                    col.name
                ),
                "simulated ms",
                &[("p50", P50), ("p99", P99)],
                &cost_rows(summary, Some(col), |c| {
                    vec![c.stats.acquire_ms.p50, c.stats.acquire_ms.p99]
                }),
                true,
            ),
        });
    }
    if let Some(col) = cost.contended {
        charts.push(Chart {
            file: "cost-throughput.svg",
            caption: "Under contention: acquisitions per second, no faults",
            group: Group::Cost,
            svg: hbars(
                &format!("Under contention: throughput ({} clients, no faults)", col.clients),
                &format!("{}: successful acquisitions per simulated second, all clients together, mean over the seeds", col.name),
                "acquisitions / simulated s",
                &[("acquisitions/s", RGBColor(84, 110, 122))],
                &cost_rows(summary, Some(col), |c| vec![c.stats.throughput_per_s]),
                false,
            ),
        });
        charts.push(Chart {
            file: "cost-waits.svg",
            caption: "Under contention: how long a client waits for the lock, no faults",
            group: Group::Cost,
            svg: hbars(
                &format!("Under contention: waiting for the lock ({} clients, no faults)", col.clients),
                &format!("{}: acquire p50 and p99 (median over the seeds), and the longest any client waited (median seed); log scale", col.name),
                "simulated ms",
                &[("p50", P50), ("p99", P99), ("longest wait", LONGEST)],
                &cost_rows(summary, Some(col), |c| {
                    vec![c.stats.acquire_ms.p50, c.stats.acquire_ms.p99, c.stats.max_wait_ms.median]
                }),
                true,
            ),
        });
    }
    if !has_matrix && !summary.cells.is_empty() {
        charts.push(Chart {
            file: "cost-cells.svg",
            caption: "Acquire latency per cell",
            group: Group::Cost,
            svg: hbars(
                "Acquire latency per scenario × scheme",
                "each seed's acquire p50 and p99, median over the seeds (log scale)",
                "simulated ms",
                &[("p50", P50), ("p99", P99)],
                &cost_rows(summary, None, |c| {
                    vec![c.stats.acquire_ms.p50, c.stats.acquire_ms.p99]
                }),
                true,
            ),
        });
    }
    charts
}

/// Where a chart goes on the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// "What it costs".
    Cost,
    /// "Heat maps".
    HeatMap,
}

/// Every chart of a comparison, with the file name each is written under (in `charts/`).
pub struct ChartSet {
    pub charts: Vec<Chart>,
}

pub struct Chart {
    pub file: &'static str,
    pub caption: &'static str,
    pub group: Group,
    pub svg: String,
}

impl ChartSet {
    /// The charts of a report: the cost charts, the fault matrix's heat map when it has one,
    /// then the catalog's.
    pub fn render(summary: &Summary) -> ChartSet {
        let mut charts = cost_charts(summary);
        if !summary.matrix_columns().is_empty() {
            charts.push(Chart {
                file: "matrix.svg",
                caption: "Fault matrix",
                group: Group::HeatMap,
                svg: matrix_heatmap(summary),
            });
        }
        if !summary.catalog_scenarios().is_empty() {
            charts.push(Chart {
                file: "violations.svg",
                caption: "Violation matrix (every scenario outside the fault matrix)",
                group: Group::HeatMap,
                svg: heatmap(summary),
            });
        }
        ChartSet { charts }
    }

    pub fn in_group(&self, group: Group) -> impl Iterator<Item = &Chart> {
        self.charts.iter().filter(move |c| c.group == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axes() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(12.0), 20.0);
        assert_eq!(nice_ceiling(41.0), 50.0);
        assert_eq!(fmt_tick(0.1), "0.1");
        assert_eq!(fmt_tick(1000.0), "1000");
        assert_eq!(hex(outcome_color(Outcome::Corrupted)), "#c62828");
        assert_eq!(tint(RGBColor(0, 0, 0), 0.0), WHITE);
    }

    #[test]
    fn text_widths_are_generous() {
        // DejaVu Sans at 12 px: "20/20" is 35.5 px, "redlock:redsync" 90 px.
        assert!(text_width("20/20", 12.0) >= 36);
        assert!(text_width("redlock:redsync", 12.0) >= 90);
    }
}
