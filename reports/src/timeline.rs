//! `timeline.svg`: one lane per client with its holding intervals, one lane per Redis server
//! (masters and replicas) with the lock key's owner and its role changes, a lane with the
//! Sentinels' decisions when there are Sentinels, faults shaded across all lanes, and every
//! overlap of two holders in red — the picture of Kleppmann's first figure, drawn from the trace.

use std::collections::BTreeMap;

use model::check::mutual_exclusion::holds;
use model::history::{Event, EventKind, FaultPhase};
use model::result::Violation;
use plotters::prelude::*;

/// What to draw besides the events.
pub struct Timeline {
    pub title: String,
    pub clients: Vec<String>,
    pub servers: Vec<String>,
    pub end_us: u64,
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
const FAULT: RGBColor = RGBColor(160, 160, 160);

/// A fault's span in true time (ms) and its label.
struct FaultSpan {
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
                            from_ms,
                            to_ms: e.t_ms(),
                            label,
                        });
                    }
                }
            }
        }
    }
    spans.extend(open.into_values().map(|(from_ms, label)| FaultSpan {
        from_ms,
        to_ms: end_ms,
        label,
    }));
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

impl Timeline {
    pub fn render(&self, events: &[Event], violations: &[Violation]) -> String {
        let mut svg = String::new();
        // Drawing into a String cannot fail for I/O reasons; a drawing error leaves a partial picture.
        let _ = self.draw(&mut svg, events, violations);
        svg
    }

    fn draw(
        &self,
        svg: &mut String,
        events: &[Event],
        violations: &[Violation],
    ) -> Result<(), Box<dyn std::error::Error + '_>> {
        let end_ms = (self.end_us as f64 / 1000.0).max(1.0);
        let has_sentinels = events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Sentinel { .. }));
        let lanes: Vec<String> = self
            .clients
            .iter()
            .cloned()
            .chain(self.servers.iter().map(|s| format!("{s} key owner")))
            .chain(has_sentinels.then(|| SENTINEL_LANE.to_string()))
            .collect();
        let lane_of = |name: &str| {
            lanes
                .iter()
                .position(|l| l == name)
                .map(|i| (lanes.len() - 1 - i) as f64)
        };
        let color_of = |client: &str| {
            let i = self.clients.iter().position(|c| c == client).unwrap_or(0);
            PALETTE[i % PALETTE.len()]
        };
        let height = 140 + 44 * lanes.len() as u32;
        let root = SVGBackend::with_string(svg, (1200, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..end_ms, 0f64..lanes.len() as f64)?;
        let lane_names = lanes.clone();
        let label_lane = move |y: &f64| {
            let i = y.floor() as usize;
            if (y - y.floor() - 0.5).abs() < 1e-6 && i < lane_names.len() {
                lane_names[lane_names.len() - 1 - i].clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(lanes.len() * 2 + 1)
            .y_label_formatter(&label_lane)
            .x_desc("true simulated time (ms)")
            .draw()?;

        let top = lanes.len() as f64;
        for span in fault_spans(events, end_ms) {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(span.from_ms, 0.0), (span.to_ms, top)],
                FAULT.mix(0.25).filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                span.label,
                (span.from_ms, top - 0.08),
                ("sans-serif", 12).into_font().color(&BLACK),
            )))?;
        }

        let holds = holds(events, self.end_us);
        for hold in &holds {
            let Some(y) = lane_of(&hold.owner) else {
                continue;
            };
            let color = color_of(&hold.owner);
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (hold.start_us as f64 / 1000.0, y + 0.2),
                    (hold.end_us as f64 / 1000.0, y + 0.8),
                ],
                color.mix(0.8).filled(),
            )))?;
        }
        for (server, owner, from, to) in key_owners(events, end_ms) {
            let Some(y) = lane_of(&format!("{server} key owner")) else {
                continue;
            };
            chart.draw_series(std::iter::once(Rectangle::new(
                [(from, y + 0.2), (to, y + 0.8)],
                color_of(&owner).mix(0.8).filled(),
            )))?;
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
                        if let Some(y) = lane_of(owner) {
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [
                                    (from as f64 / 1000.0, y + 0.1),
                                    (to as f64 / 1000.0, y + 0.9),
                                ],
                                OVERLAP.mix(0.55).filled(),
                            )))?;
                        }
                    }
                }
            }
        }

        // Role changes of Redis nodes (promotion, demotion, restart), on their lane.
        for e in events {
            let EventKind::Replication { what, detail } = &e.kind else {
                continue;
            };
            let label = match what.as_str() {
                "role" => detail.split(" (").next().unwrap_or(detail).to_string(),
                "restart" => "restart".to_string(),
                _ => continue,
            };
            let Some(y) = lane_of(&format!("{} key owner", e.node)) else {
                continue;
            };
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (e.t_ms(), y + 0.5),
                5,
                BLACK.filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("→ {label}"),
                (e.t_ms(), y + 0.95),
                ("sans-serif", 11).into_font().color(&BLACK),
            )))?;
        }

        // What the Sentinels decided, once per decision (every Sentinel logs it).
        if let Some(y) = lane_of(SENTINEL_LANE) {
            let mut seen = std::collections::BTreeSet::new();
            for e in events {
                let EventKind::Sentinel { what, detail, .. } = &e.kind else {
                    continue;
                };
                if !SENTINEL_MARKS.contains(&what.as_str()) {
                    continue;
                }
                let label = match what.as_str() {
                    "+switch-master" => {
                        format!("{what} {}", detail.split(' ').nth(3).unwrap_or_default())
                    }
                    "+tilt" => format!("{what} {}", e.node),
                    _ => format!("{what} {detail}"),
                };
                if !seen.insert(label.clone()) {
                    continue;
                }
                chart.draw_series(std::iter::once(TriangleMarker::new(
                    (e.t_ms(), y + 0.5),
                    5,
                    RGBColor(120, 60, 0).filled(),
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    label,
                    (e.t_ms(), y + 0.15 + 0.2 * (seen.len() % 4) as f64),
                    ("sans-serif", 11).into_font().color(&RGBColor(120, 60, 0)),
                )))?;
            }
        }

        // Resource accesses that went wrong, marked on the writer's lane. Every one gets a cross;
        // a label only when it is clear of the lane's previous one, so dense runs stay readable.
        let label_gap_ms = self.end_us as f64 / 1000.0 * 0.08;
        let mut last_label_ms: std::collections::BTreeMap<(usize, &str), f64> = Default::default();
        for e in events {
            let (client, label, color) = match &e.kind {
                EventKind::ResourceWrite {
                    client,
                    lost_update: true,
                    ..
                } => (client, "lost update", OVERLAP),
                EventKind::ResourceRejected { client, op, .. } => (
                    client,
                    if op == "write" {
                        "stale write rejected"
                    } else {
                        "stale read rejected"
                    },
                    BLACK,
                ),
                _ => continue,
            };
            let Some(y) = lane_of(client) else { continue };
            chart.draw_series(std::iter::once(Cross::new(
                (e.t_ms(), y + 0.5),
                7,
                color.stroke_width(3),
            )))?;
            let last = last_label_ms.entry((y as usize, label)).or_insert(f64::MIN);
            if e.t_ms() - *last < label_gap_ms {
                continue;
            }
            *last = e.t_ms();
            chart.draw_series(std::iter::once(Text::new(
                label.to_string(),
                (e.t_ms(), y + 0.95),
                ("sans-serif", 12).into_font().color(&color),
            )))?;
        }
        root.present()?;
        Ok(())
    }
}
