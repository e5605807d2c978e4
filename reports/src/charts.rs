//! The comparison charts, as SVG drawn with plotters: the fault matrix and the catalog's
//! violation matrix as heat maps, acquire latency quantiles per scheme and throughput per
//! scheme. Layout is computed here in pixels (long
//! scheme and scenario names get the room they need); plotters draws the shapes and the text.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::summary::{Outcome, Summary, fmt_ms};

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
fn tint(c: RGBColor, share: f64) -> RGBColor {
    let mix = |x: u8| (255.0 - (255.0 - x as f64) * share).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// Rough width of `text` at `size` px in a sans-serif font.
fn text_width(text: &str, size: f64) -> u32 {
    (text.chars().count() as f64 * size * 0.56).ceil() as u32
}

const GRID: RGBColor = RGBColor(225, 225, 225);
const INK: RGBColor = RGBColor(33, 33, 33);
const MUTED: RGBColor = RGBColor(110, 110, 110);

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// plotters' SVG backend writes font sizes divided by 1.24: this undoes it, so `size` is px.
const FONT_SCALE: f64 = 1.24;

fn text(
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

fn rect(area: &Area, (x0, y0): (i32, i32), (x1, y1): (i32, i32), style: ShapeStyle) -> DrawResult {
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], style))
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

/// The catalog's violation matrix as a heat map: a row per scheme, a column per catalog
/// scenario, each cell coloured by its worst outcome, as strong as the share of seeds that
/// broke something, and labelled `violating/run`.
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
    let cols = scenarios.len().max(1) as u32;
    let rows = schemes.len().max(1) as u32;
    let label_w = schemes
        .iter()
        .map(|s| text_width(s, 13.0))
        .max()
        .unwrap_or(60)
        .clamp(60, 320)
        + 16;
    let header_h = scenarios
        .iter()
        .map(|s| text_width(&s.name, 12.0))
        .max()
        .unwrap_or(60)
        .clamp(40, 300)
        + 14;
    let cell_w = ((WIDTH - label_w - 20) / cols).clamp(34, 96);
    let cell_h = 26;
    let top = 44;
    let legend_h = 24 + 18 * Outcome::ALL.len() as u32;
    let legend_w = Outcome::ALL
        .iter()
        .map(|o| text_width(o.legend(), 12.0))
        .max()
        .unwrap_or(0)
        + 40;
    let width = (label_w + cols * cell_w + 20)
        .max(legend_w)
        .clamp(460, WIDTH);
    let height = top + header_h + rows * cell_h + legend_h;
    render((width, height), |area| {
        text(
            area,
            "Violation matrix: share of seeds that broke something",
            (12, 10),
            17.0,
            &INK,
            Pos::new(HPos::Left, VPos::Top),
        )?;
        let grid_top = (top + header_h) as i32;
        for (c, scenario) in scenarios.iter().enumerate() {
            let x = (label_w + c as u32 * cell_w + cell_w / 2) as i32;
            let style = ("sans-serif", 12.0 * FONT_SCALE)
                .into_font()
                .transform(FontTransform::Rotate270)
                .color(&INK)
                .pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(scenario.name.clone(), (x, grid_top - 6), style))
                .map_err(|e| e.to_string())?;
        }
        for (r, scheme) in schemes.iter().enumerate() {
            let y = grid_top + (r as u32 * cell_h) as i32;
            text(
                area,
                scheme,
                (label_w as i32 - 8, y + cell_h as i32 / 2),
                13.0,
                &INK,
                Pos::new(HPos::Right, VPos::Center),
            )?;
            for (c, scenario) in scenarios.iter().enumerate() {
                let x = (label_w + c as u32 * cell_w) as i32;
                let (x1, y1) = (x + cell_w as i32 - 2, y + cell_h as i32 - 2);
                match summary.cell(&scenario.name, scheme) {
                    None => rect(area, (x, y), (x1, y1), RGBColor(246, 246, 246).filled())?,
                    Some(cell) => {
                        let s = &cell.stats;
                        let (fill, dark) = cell_fill(s);
                        rect(area, (x, y), (x1, y1), fill.filled())?;
                        let ink = if dark { WHITE } else { INK };
                        text(
                            area,
                            &format!("{}/{}", s.seeds_violating, s.seeds_run),
                            ((x + x1) / 2, (y + y1) / 2),
                            11.0,
                            &ink,
                            Pos::new(HPos::Center, VPos::Center),
                        )?;
                    }
                }
            }
        }
        let legend_top = grid_top + (rows * cell_h) as i32 + 14;
        outcome_legend(area, legend_top)
    })
}

/// The outcome colours, one a line, from `top`.
fn outcome_legend(area: &Area, top: i32) -> DrawResult {
    for (i, outcome) in Outcome::ALL.iter().enumerate() {
        {
            let x = 12;
            let y = top + i as i32 * 18;
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
    }
    Ok(())
}

/// The cell colour: the outcome's, as strong as the share of seeds that broke something.
fn cell_fill(stats: &crate::summary::CellStats) -> (RGBColor, bool) {
    let share = match stats.outcome {
        Outcome::Ok | Outcome::NoRuns => 0.35,
        _ => 0.3 + 0.7 * stats.violating_share(),
    };
    (tint(outcome_color(stats.outcome), share), share > 0.6)
}

/// The fault matrix as a heat map (the picture the README shows): a row per scheme, grouped by
/// family, a column per fault class, grouped by fault family; worst-case cells say
/// `violating/run`, random-rate cells (headers marked `~`) the share of seeds.
pub fn matrix_heatmap(summary: &Summary) -> String {
    let columns = crate::matrix::ordered_columns(summary);
    let rows = &summary.matrix_rows;
    let families = rows
        .iter()
        .enumerate()
        .filter(|(i, r)| *i == 0 || rows[i - 1].family != r.family)
        .count() as u32;
    let header = |c: &crate::summary::ScenarioInfo| {
        let m = c.matrix.as_ref();
        let prefix = if m.is_some_and(|m| m.random) {
            "~ "
        } else {
            ""
        };
        format!(
            "{prefix}{}",
            m.map_or(c.name.as_str(), |m| m.column.as_str())
        )
    };
    let label_w = rows
        .iter()
        .map(|r| text_width(&r.scheme, 12.0))
        .max()
        .unwrap_or(60)
        .clamp(60, 260)
        + 14;
    let header_h = columns
        .iter()
        .map(|c| text_width(&header(c), 11.0))
        .max()
        .unwrap_or(60)
        .clamp(40, 200)
        + 12;
    let cols = columns.len().max(1) as u32;
    let cell_w = ((WIDTH - label_w - 16) / cols).clamp(30, 90);
    let (cell_h, family_h, top) = (20, 18, 40);
    let width = (label_w + cols * cell_w + 16).clamp(460, WIDTH);
    let grid_h = rows.len() as u32 * cell_h + families * family_h;
    let height = top + header_h + grid_h + 24 + 18 * Outcome::ALL.len() as u32;
    render((width, height), |area| {
        text(
            area,
            "Which lock survives what: seeds that broke something (~ random faults: share of seeds)",
            (12, 10),
            16.0,
            &INK,
            Pos::new(HPos::Left, VPos::Top),
        )?;
        let grid_top = (top + header_h) as i32;
        let mut previous_family = "";
        for (c, col) in columns.iter().enumerate() {
            let family = col.matrix.as_ref().map_or("", |m| m.family.as_str());
            let x = (label_w + c as u32 * cell_w) as i32;
            if c > 0 && family != previous_family {
                area.draw(&PathElement::new(
                    vec![
                        (x - 1, grid_top - header_h as i32 + 4),
                        (x - 1, grid_top + grid_h as i32),
                    ],
                    MUTED.stroke_width(1),
                ))
                .map_err(|e| e.to_string())?;
            }
            previous_family = family;
            let style = ("sans-serif", 11.0 * FONT_SCALE)
                .into_font()
                .transform(FontTransform::Rotate270)
                .color(&INK)
                .pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(
                header(col),
                (x + cell_w as i32 / 2, grid_top - 6),
                style,
            ))
            .map_err(|e| e.to_string())?;
        }
        let mut y = grid_top;
        for (r, row) in rows.iter().enumerate() {
            if r == 0 || rows[r - 1].family != row.family {
                text(
                    area,
                    &row.family,
                    (12, y + family_h as i32 / 2 + 2),
                    11.5,
                    &MUTED,
                    Pos::new(HPos::Left, VPos::Center),
                )?;
                y += family_h as i32;
            }
            let label = if row.lease {
                row.scheme.clone()
            } else {
                format!("{} (no lease)", row.scheme)
            };
            text(
                area,
                &label,
                (label_w as i32 - 6, y + cell_h as i32 / 2),
                12.0,
                &INK,
                Pos::new(HPos::Right, VPos::Center),
            )?;
            for (c, col) in columns.iter().enumerate() {
                let x = (label_w + c as u32 * cell_w) as i32;
                let (x1, y1) = (x + cell_w as i32 - 2, y + cell_h as i32 - 2);
                let Some(cell) = summary.cell(&col.name, &row.scheme) else {
                    rect(area, (x, y), (x1, y1), RGBColor(246, 246, 246).filled())?;
                    continue;
                };
                let (fill, dark) = cell_fill(&cell.stats);
                rect(area, (x, y), (x1, y1), fill.filled())?;
                let random = col.matrix.as_ref().is_some_and(|m| m.random);
                let (figure, _) = crate::matrix::figure(cell, random);
                text(
                    area,
                    &figure,
                    ((x + x1) / 2, (y + y1) / 2),
                    10.0,
                    if dark { &WHITE } else { &INK },
                    Pos::new(HPos::Center, VPos::Center),
                )?;
            }
            y += cell_h as i32;
        }
        outcome_legend(area, y + 14)
    })
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
        .clamp(60, 360)
        + 16;
    let bar_h = 10;
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

fn scheme_label(s: &crate::summary::SchemeStats) -> String {
    format!("{} · {} runs", s.scheme, s.runs)
}

/// Acquire latency per scheme: the median over its runs of each run's p50, p90 and p99.
pub fn latency(summary: &Summary) -> String {
    let rows: Vec<Row> = summary
        .scheme_totals
        .iter()
        .map(|s| Row {
            label: scheme_label(s),
            values: vec![s.acquire_ms.p50, s.acquire_ms.p90, s.acquire_ms.p99],
        })
        .collect();
    hbars(
        "Acquire latency per scheme",
        "each run's p50 / p90 / p99 from acquire start to success, median over the scheme's runs in this report (log scale)",
        "simulated ms",
        &[
            ("p50", RGBColor(158, 202, 225)),
            ("p90", RGBColor(66, 146, 198)),
            ("p99", RGBColor(8, 69, 148)),
        ],
        &rows,
        true,
    )
}

/// Throughput per scheme: successful acquisitions per simulated second, mean over its runs.
pub fn throughput(summary: &Summary) -> String {
    let rows: Vec<Row> = summary
        .scheme_totals
        .iter()
        .map(|s| Row {
            label: scheme_label(s),
            values: vec![s.throughput_per_s],
        })
        .collect();
    hbars(
        "Throughput per scheme",
        "successful acquisitions per simulated second, all clients together, mean over the scheme's runs in this report",
        "acquisitions / simulated s",
        &[("acquisitions/s", RGBColor(84, 110, 122))],
        &rows,
        false,
    )
}

/// Every chart of a comparison, with the file name each is written under (in `charts/`).
pub struct ChartSet {
    pub charts: Vec<Chart>,
}

pub struct Chart {
    pub file: &'static str,
    pub title: &'static str,
    pub svg: String,
}

impl ChartSet {
    /// The charts of a report: the fault matrix's when it has one, then the catalog's.
    pub fn render(summary: &Summary) -> ChartSet {
        let matrix = (!summary.matrix_columns().is_empty()).then(|| Chart {
            file: "matrix.svg",
            title: "Fault matrix",
            svg: matrix_heatmap(summary),
        });
        ChartSet {
            charts: matrix
                .into_iter()
                .chain([
                    Chart {
                        file: "violations.svg",
                        title: "Violation matrix (catalog)",
                        svg: heatmap(summary),
                    },
                    Chart {
                        file: "acquire-latency.svg",
                        title: "Acquire latency per scheme",
                        svg: latency(summary),
                    },
                    Chart {
                        file: "throughput.svg",
                        title: "Throughput per scheme",
                        svg: throughput(summary),
                    },
                ])
                .collect(),
        }
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
}
