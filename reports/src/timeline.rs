//! `timeline.svg`: one lane per client with its holding intervals, one lane per Redis server
//! (masters and replicas) with the lock key's owner and its role changes, a lane with the
//! Sentinels' decisions when there are Sentinels, and every overlap of two holders in red — the
//! picture of Kleppmann's first figure, drawn from the trace. Every fault is a bar in a band
//! above the lanes (with its label) and shades only the lane of the node it strikes, so a fault
//! that lasts the whole run does not hide another's shading. Labels are placed where they do
//! not run into each other (a further row when they would); a legend explains the colours.

use std::collections::BTreeMap;

use model::check::mutual_exclusion::holds;
use model::history::{Event, EventKind, FaultPhase};
use model::result::Violation;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::charts::{DrawResult, rect, text, text_width};

/// What to draw besides the events.
pub struct Timeline {
    pub title: String,
    pub clients: Vec<String>,
    pub servers: Vec<String>,
    pub end_us: u64,
    /// Node names by address (`10.1.0.1` → `redis-1`): Sentinel events name addresses.
    pub addresses: BTreeMap<String, String>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];
/// The lane of Sentinel decisions, present when the run has Sentinels.
const SENTINEL_LANE: &str = "sentinels";
/// The Sentinel events the timeline marks.
const SENTINEL_MARKS: &[&str] = &[
    "+odown",
    "+elected-leader",
    "+promoted-slave",
    "+switch-master",
    "+convert-to-slave",
    "+tilt",
];
const OVERLAP: RGBColor = RGBColor(214, 39, 40);
const FAULT: RGBColor = RGBColor(120, 120, 120);
const SENTINEL: RGBColor = RGBColor(120, 60, 0);
const INK: RGBColor = RGBColor(33, 33, 33);
const MUTED: RGBColor = RGBColor(110, 110, 110);

const WIDTH: i32 = 1200;
const MARGIN: i32 = 12;
const LANE_H: i32 = 48;
/// A row of labels (fault band, Sentinel lane, the marks in a lane).
const ROW_H: i32 = 15;
const LABEL_SIZE: f64 = 11.0;

/// The faults that stop a node or cut it off (`scenario::FaultKind::name`): they shade the
/// node's lane; the others (delays, partitions, dropped connections, clocks) are bars in the
/// band only, so a delay that lasts the whole run hides nothing.
const SHADES_LANE: &[&str] = &["pause", "crash", "power_loss", "isolate"];

/// A fault's span in true time (ms), the node it strikes, its kind and its label.
struct FaultSpan {
    node: String,
    kind: String,
    from_ms: f64,
    to_ms: f64,
    label: String,
}

fn fault_spans(events: &[Event], end_ms: f64) -> Vec<FaultSpan> {
    let mut open: BTreeMap<(String, String), (f64, String)> = BTreeMap::new();
    let mut spans = Vec::new();
    for e in events {
        if let EventKind::Fault {
            fault,
            phase,
            detail,
        } = &e.kind
        {
            let key = (e.node.clone(), fault.clone());
            match phase {
                FaultPhase::Injected => {
                    open.insert(key, (e.t_ms(), detail.clone()));
                }
                FaultPhase::Healed => {
                    if let Some((from_ms, label)) = open.remove(&key) {
                        spans.push(FaultSpan {
                            node: key.0,
                            kind: key.1,
                            from_ms,
                            to_ms: e.t_ms(),
                            label,
                        });
                    }
                }
            }
        }
    }
    spans.extend(
        open.into_iter()
            .map(|((node, kind), (from_ms, label))| FaultSpan {
                node,
                kind,
                from_ms,
                to_ms: end_ms,
                label,
            }),
    );
    spans.sort_by(|a, b| a.from_ms.total_cmp(&b.from_ms));
    spans
}

/// Intervals during which each server's lock key belonged to each owner: (server, owner, from, to).
fn key_owners(events: &[Event], end_ms: f64) -> Vec<(String, String, f64, f64)> {
    let mut current: BTreeMap<String, (String, f64)> = BTreeMap::new();
    let mut spans = Vec::new();
    for e in events {
        if let EventKind::KeyOwner { owner, .. } = &e.kind {
            if let Some((who, from)) = current.remove(&e.node) {
                spans.push((e.node.clone(), who, from, e.t_ms()));
            }
            if let Some(owner) = owner {
                current.insert(e.node.clone(), (owner.clone(), e.t_ms()));
            }
        }
    }
    spans.extend(
        current
            .into_iter()
            .map(|(server, (who, from))| (server, who, from, end_ms)),
    );
    spans
}

/// Rows of labels that must not run into each other: each row keeps the x ranges taken.
#[derive(Default)]
struct Rows {
    taken: Vec<Vec<(i32, i32)>>,
}

impl Rows {
    /// The first row (below `max_rows`) where `[x0, x1)` is free, taken; `None` when every
    /// row is full there.
    fn place(&mut self, x0: i32, x1: i32, max_rows: usize) -> Option<usize> {
        for (i, row) in self.taken.iter_mut().enumerate() {
            if row.iter().all(|&(a, b)| x1 + 4 <= a || b + 4 <= x0) {
                row.push((x0, x1));
                return Some(i);
            }
        }
        (self.taken.len() < max_rows).then(|| {
            self.taken.push(vec![(x0, x1)]);
            self.taken.len() - 1
        })
    }
}

/// A label that starts at `x` if it can, within `[left, right]`: shortened with "…" when it is
/// wider than that, pulled left when it would end past `right`. Its left edge, width and text.
fn fit_label(x: i32, label: &str, left: i32, right: i32) -> (i32, i32, String) {
    let room = (right - left).max(0);
    let mut text = label.to_string();
    if text_width(&text, LABEL_SIZE) as i32 > room {
        let mut chars: Vec<char> = label.chars().collect();
        while !chars.is_empty() {
            chars.pop();
            text = chars.iter().collect::<String>() + "…";
            if text_width(&text, LABEL_SIZE) as i32 <= room {
                break;
            }
        }
    }
    let width = text_width(&text, LABEL_SIZE) as i32;
    (x.min(right - width).max(left), width, text)
}

/// A Sentinel decision in words, addresses replaced by node names (`+switch-master redis-1 →
/// redis-1-replica-1`).
fn sentinel_label(
    what: &str,
    detail: &str,
    node: &str,
    names: &BTreeMap<String, String>,
) -> String {
    let words: Vec<&str> = detail.split_whitespace().collect();
    let name = |w: &str| names.get(w).cloned().unwrap_or_else(|| w.to_string());
    match what {
        // `<group> <old ip> <port> <new ip> <port>` (sentinel.c sentinelFailoverSwitchToPromotedSlave).
        "+switch-master" if words.len() >= 4 => {
            format!("{what} {} → {}", name(words[1]), name(words[3]))
        }
        "+tilt" => format!("{what} {node}"),
        _ => {
            let mut out = vec![what.to_string()];
            let mut skip_port = false;
            for w in words {
                if skip_port && w.chars().all(|c| c.is_ascii_digit()) {
                    skip_port = false;
                    continue;
                }
                skip_port = names.contains_key(w);
                out.push(name(w));
            }
            out.join(" ")
        }
    }
}

fn left() -> Pos {
    Pos::new(HPos::Left, VPos::Center)
}

/// Tick spacing: 1, 2 or 5 × a power of ten, about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|x| *x >= raw)
        .unwrap_or(10.0 * p)
}

/// The lanes' vertical layout: each lane's top and height.
struct Lane {
    name: String,
    label: String,
    top: i32,
    height: i32,
}

impl Timeline {
    pub fn render(&self, events: &[Event], violations: &[Violation]) -> String {
        let mut svg = String::new();
        {
            // Drawing into a String cannot fail for I/O reasons; an error leaves a partial picture.
            let _ = self.draw(&mut svg, events, violations);
        }
        svg
    }

    fn lane_label(&self, name: &str) -> String {
        if self.servers.iter().any(|s| s == name) {
            format!("{name} key owner")
        } else {
            name.to_string()
        }
    }

    fn draw(&self, svg: &mut String, events: &[Event], violations: &[Violation]) -> DrawResult {
        let end_ms = (self.end_us as f64 / 1000.0).max(1.0);
        let has_sentinels = events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Sentinel { .. }));
        let names: Vec<String> = self
            .clients
            .iter()
            .chain(&self.servers)
            .cloned()
            .chain(has_sentinels.then(|| SENTINEL_LANE.to_string()))
            .collect();
        let label_w = names
            .iter()
            .map(|n| text_width(&self.lane_label(n), 12.0) as i32)
            .max()
            .unwrap_or(60)
            + MARGIN
            + 10;
        let last_tick_w = text_width(&format!("{:.0}", end_ms), 11.0) as i32;
        let (x0, x1) = (label_w, WIDTH - MARGIN - last_tick_w / 2 - 4);
        let x_of =
            |ms: f64| x0 + (((x1 - x0) as f64) * (ms / end_ms).clamp(0.0, 1.0)).round() as i32;
        let label_right = WIDTH - MARGIN;

        // The fault band: a row per set of faults whose bars and labels do not meet.
        let faults = fault_spans(events, end_ms);
        let mut band = Rows::default();
        let fault_rows: Vec<(usize, i32, String)> = faults
            .iter()
            .map(|f| {
                let (fx0, fx1) = (x_of(f.from_ms), x_of(f.to_ms).max(x_of(f.from_ms) + 2));
                let (lx, w, label) = fit_label(fx0 + 3, &f.label, x0, label_right);
                let row = band
                    .place(fx0.min(lx), fx1.max(lx + w), usize::MAX)
                    .unwrap_or(0);
                (row, lx, label)
            })
            .collect();
        let band_top = 40;
        let band_h = band.taken.len() as i32 * (ROW_H + 3);

        // The Sentinel decisions, once each, in rows of their own lane.
        let mut sentinel_rows = Rows::default();
        let mut seen = std::collections::BTreeSet::new();
        let mut sentinel_marks = Vec::new();
        for e in events {
            let EventKind::Sentinel { what, detail, .. } = &e.kind else {
                continue;
            };
            if !SENTINEL_MARKS.contains(&what.as_str()) {
                continue;
            }
            let label = sentinel_label(what, detail, &e.node, &self.addresses);
            if !seen.insert(label.clone()) {
                continue;
            }
            let x = x_of(e.t_ms());
            let (lx, w, label) = fit_label(x + 6, &label, x0, label_right);
            let row = sentinel_rows
                .place(x.min(lx) - 5, lx + w, usize::MAX)
                .unwrap_or(0);
            sentinel_marks.push((x, lx, row, label));
        }

        // Lanes top to bottom.
        let mut lanes = Vec::new();
        let mut y = band_top + band_h + 10;
        for name in &names {
            let height = if name == SENTINEL_LANE {
                (sentinel_rows.taken.len() as i32 * ROW_H + 12).max(LANE_H)
            } else {
                LANE_H
            };
            lanes.push(Lane {
                name: name.clone(),
                label: self.lane_label(name),
                top: y,
                height,
            });
            y += height;
        }
        let plot_bottom = y;
        let lane = |name: &str| lanes.iter().find(|l| l.name == name);
        let color_of = |client: &str| {
            let i = self.clients.iter().position(|c| c == client).unwrap_or(0);
            PALETTE[i % PALETTE.len()]
        };
        let legend = self.legend_items(has_sentinels);
        let legend_rows = legend_layout(&legend, WIDTH - 2 * MARGIN);
        let legend_top = plot_bottom + 46;
        let height = legend_top + legend_rows.len() as i32 * 18 + 10;

        let root = SVGBackend::with_string(svg, (WIDTH as u32, height as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let area = &root;
        text(
            area,
            &self.title,
            (MARGIN, 10),
            16.0,
            &INK,
            Pos::new(HPos::Left, VPos::Top),
        )?;
        if !faults.is_empty() {
            text(
                area,
                "faults",
                (label_w - 8, band_top + ROW_H / 2),
                12.0,
                &MUTED,
                Pos::new(HPos::Right, VPos::Center),
            )?;
        }

        // Lanes: alternate backgrounds, labels.
        for (i, l) in lanes.iter().enumerate() {
            if i % 2 == 0 {
                rect(
                    area,
                    (x0, l.top),
                    (x1, l.top + l.height),
                    RGBColor(247, 247, 247).mix(0.9).filled(),
                )?;
            }
            text(
                area,
                &l.label,
                (label_w - 8, l.top + l.height / 2),
                12.0,
                &INK,
                Pos::new(HPos::Right, VPos::Center),
            )?;
        }

        // Faults: a bar and its label in the band, shading on the struck node's lane (or on
        // every lane for a fault of the network or of a node without a lane).
        for (f, (row, lx, label)) in faults.iter().zip(&fault_rows) {
            let (fx0, fx1) = (x_of(f.from_ms), x_of(f.to_ms).max(x_of(f.from_ms) + 2));
            let by = band_top + *row as i32 * (ROW_H + 3);
            rect(
                area,
                (fx0, by + ROW_H - 4),
                (fx1, by + ROW_H - 1),
                FAULT.mix(0.7).filled(),
            )?;
            text(
                area,
                label,
                (*lx, by + (ROW_H - 4) / 2),
                LABEL_SIZE,
                &INK,
                left(),
            )?;
            if let Some(l) = lane(&f.node).filter(|_| SHADES_LANE.contains(&f.kind.as_str())) {
                rect(
                    area,
                    (fx0, l.top),
                    (fx1, l.top + l.height),
                    FAULT.mix(0.3).filled(),
                )?;
            }
        }

        let bar = |l: &Lane| (l.top + 13, l.top + l.height - 16);
        let holds = holds(events, self.end_us);
        for hold in &holds {
            let Some(l) = lane(&hold.owner) else { continue };
            let (ya, yb) = bar(l);
            let (ha, hb) = (
                x_of(hold.start_us as f64 / 1000.0),
                x_of(hold.end_us as f64 / 1000.0),
            );
            rect(
                area,
                (ha, ya),
                (hb.max(ha + 1), yb),
                color_of(&hold.owner).mix(0.8).filled(),
            )?;
        }
        for (server, owner, from, to) in key_owners(events, end_ms) {
            let Some(l) = lane(&server) else { continue };
            let (ya, yb) = bar(l);
            rect(
                area,
                (x_of(from), ya),
                (x_of(to).max(x_of(from) + 1), yb),
                color_of(&owner).mix(0.8).filled(),
            )?;
        }

        // Overlaps: the part of two holds that coincide, in red over both lanes.
        for v in violations.iter().filter(|v| v.kind == "mutual_exclusion") {
            let [a, b] = [&v.nodes[0], &v.nodes[1]];
            for first in holds.iter().filter(|h| &h.owner == a) {
                for second in holds.iter().filter(|h| &h.owner == b) {
                    let from = first.start_us.max(second.start_us);
                    let to = first.end_us.min(second.end_us);
                    if from >= to {
                        continue;
                    }
                    for owner in [a, b] {
                        if let Some(l) = lane(owner) {
                            let (ya, yb) = bar(l);
                            rect(
                                area,
                                (x_of(from as f64 / 1000.0), ya - 3),
                                (
                                    x_of(to as f64 / 1000.0).max(x_of(from as f64 / 1000.0) + 1),
                                    yb + 3,
                                ),
                                OVERLAP.mix(0.55).filled(),
                            )?;
                        }
                    }
                }
            }
        }

        // Marks with labels in a lane's top strip, placed where they fit (else the mark
        // alone): role changes on server lanes, resource errors on client lanes.
        let mut strips: BTreeMap<String, Rows> = BTreeMap::new();
        for e in events {
            let (lane_name, label, color) = match &e.kind {
                EventKind::Replication { what, detail } => {
                    let label = match what.as_str() {
                        "role" => detail.split(" (").next().unwrap_or(detail).to_string(),
                        "restart" => "restart".to_string(),
                        _ => continue,
                    };
                    (e.node.clone(), format!("→ {label}"), INK)
                }
                EventKind::ResourceWrite {
                    client,
                    lost_update: true,
                    ..
                } => (client.clone(), "lost update".to_string(), OVERLAP),
                EventKind::ResourceRejected { client, op, .. } => {
                    (client.clone(), format!("stale {op} rejected"), INK)
                }
                _ => continue,
            };
            let Some(l) = lane(&lane_name) else { continue };
            let x = x_of(e.t_ms());
            let (ya, yb) = bar(l);
            if matches!(e.kind, EventKind::Replication { .. }) {
                area.draw(&TriangleMarker::new((x, (ya + yb) / 2), 5, INK.filled()))?;
            } else {
                area.draw(&Cross::new((x, (ya + yb) / 2), 5, color.stroke_width(2)))?;
            }
            let (lx, w, label) = fit_label(x + 4, &label, x0, label_right);
            // Above the bar, or below it when that is taken; else the mark alone.
            if let Some(row) = strips
                .entry(lane_name.clone())
                .or_default()
                .place(lx, lx + w, 2)
            {
                let ly = if row == 0 { l.top + 6 } else { yb + 8 };
                text(area, &label, (lx, ly), LABEL_SIZE, &color, left())?;
            }
        }

        // What the Sentinels decided.
        if let Some(l) = lane(SENTINEL_LANE) {
            for (x, lx, row, label) in &sentinel_marks {
                let ly = l.top + 6 + *row as i32 * ROW_H + ROW_H / 2 - 1;
                area.draw(&TriangleMarker::new((*x, ly), 4, SENTINEL.filled()))?;
                text(area, label, (*lx, ly), LABEL_SIZE, &SENTINEL, left())?;
            }
        }

        // The time axis.
        let step = tick_step(end_ms, 10.0);
        area.draw(&PathElement::new(
            vec![(x0, plot_bottom), (x1, plot_bottom)],
            INK.stroke_width(1),
        ))?;
        let mut t = 0.0;
        while t <= end_ms + 1e-9 {
            let x = x_of(t);
            area.draw(&PathElement::new(
                vec![(x, plot_bottom), (x, plot_bottom + 4)],
                INK.stroke_width(1),
            ))?;
            text(
                area,
                &format!("{t:.0}"),
                (x, plot_bottom + 6),
                11.0,
                &INK,
                Pos::new(HPos::Center, VPos::Top),
            )?;
            t += step;
        }
        text(
            area,
            "true simulated time (ms)",
            ((x0 + x1) / 2, plot_bottom + 24),
            12.0,
            &INK,
            Pos::new(HPos::Center, VPos::Top),
        )?;

        // The legend.
        for (row, items) in legend_rows.iter().enumerate() {
            let ly = legend_top + row as i32 * 18;
            for (x, item) in items {
                let lx = MARGIN + x;
                match item.swatch {
                    Swatch::Fill(c, alpha) => {
                        rect(area, (lx, ly - 6), (lx + 14, ly + 6), c.mix(alpha).filled())?
                    }
                    Swatch::Cross(c) => {
                        area.draw(&Cross::new((lx + 7, ly), 5, c.stroke_width(2)))?
                    }
                    Swatch::Triangle(c) => {
                        area.draw(&TriangleMarker::new((lx + 7, ly), 5, c.filled()))?
                    }
                }
                text(area, &item.text, (lx + 20, ly), 11.5, &INK, left())?;
            }
        }
        root.present()?;
        Ok(())
    }

    fn legend_items(&self, sentinels: bool) -> Vec<LegendItem> {
        let mut items: Vec<LegendItem> = self
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| LegendItem {
                swatch: Swatch::Fill(PALETTE[i % PALETTE.len()], 0.8),
                text: format!("{c} holds the lock (on a key-owner lane: the key is {c}'s)"),
            })
            .collect();
        items.extend([
            LegendItem {
                swatch: Swatch::Fill(OVERLAP, 0.55),
                text: "red over a holder's colour: two clients hold the lock at once".into(),
            },
            LegendItem {
                swatch: Swatch::Fill(FAULT, 0.3),
                text: "grey: the node is paused, crashed or cut off (every fault: a bar in the band on top)".into(),
            },
            LegendItem {
                swatch: Swatch::Cross(OVERLAP),
                text: "lost update".into(),
            },
            LegendItem {
                swatch: Swatch::Cross(INK),
                text: "stale write (or read) rejected by the fencing check".into(),
            },
            LegendItem {
                swatch: Swatch::Triangle(INK),
                text: "a Redis node's role change or restart".into(),
            },
        ]);
        if sentinels {
            items.push(LegendItem {
                swatch: Swatch::Triangle(SENTINEL),
                text: "a Sentinel decision".into(),
            });
        }
        items
    }
}

enum Swatch {
    Fill(RGBColor, f64),
    Cross(RGBColor),
    Triangle(RGBColor),
}

struct LegendItem {
    swatch: Swatch,
    text: String,
}

/// The legend in rows that fit `width`: (x offset, item) per row.
fn legend_layout(items: &[LegendItem], width: i32) -> Vec<Vec<(i32, &LegendItem)>> {
    let mut rows: Vec<Vec<(i32, &LegendItem)>> = vec![Vec::new()];
    let mut x = 0;
    for item in items {
        let w = 20 + text_width(&item.text, 11.5) as i32 + 18;
        if x > 0 && x + w > width {
            rows.push(Vec::new());
            x = 0;
        }
        rows.last_mut().expect("a row").push((x, item));
        x += w;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_labels_name_nodes_not_addresses() {
        let names: BTreeMap<String, String> =
            [("10.1.0.1", "redis-1"), ("10.4.1.1", "redis-1-replica-1")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
        assert_eq!(
            sentinel_label(
                "+switch-master",
                "mymaster 10.1.0.1 6379 10.4.1.1 6379",
                "sentinel-1",
                &names
            ),
            "+switch-master redis-1 → redis-1-replica-1"
        );
        assert_eq!(
            sentinel_label("+odown", "10.1.0.1 6379 #quorum 2/2", "sentinel-1", &names),
            "+odown redis-1 #quorum 2/2"
        );
    }

    #[test]
    fn long_labels_are_shortened_to_the_room_there_is() {
        let (x, w, text) = fit_label(500, &"partition ".repeat(40), 100, 600);
        assert!(
            text.ends_with('…') && w <= 500 && x >= 100 && x + w <= 600,
            "{x} {w} {text}"
        );
        assert_eq!(
            fit_label(590, "short", 100, 600).0,
            600 - text_width("short", LABEL_SIZE) as i32
        );
    }

    #[test]
    fn labels_that_would_meet_go_to_another_row() {
        let mut rows = Rows::default();
        assert_eq!(rows.place(0, 100, 3), Some(0));
        assert_eq!(rows.place(50, 150, 3), Some(1));
        assert_eq!(rows.place(110, 200, 3), Some(0));
        assert_eq!(rows.place(60, 70, 2), None);
    }
}
