//! The incidents section of the report: reported failures of real lock libraries, each case a
//! failing version and its fixed control (`scenarios/incidents/`), one row per case.
//!
//! A scenario's `incident` object names the case both of its files share, the library, the
//! version the file runs, its `role` (`failing` | `fixed`), the issue or pull request and the
//! mechanism in one sentence. A seed counts as violating when a property the file's `expect`
//! names is broken (computed by `compare`, `sim::scenario::expect::broken`): the failing
//! version should violate on every seed, the fixed one on none.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::html::esc;
use crate::summary::Summary;

/// `incident` in a scenario file, and in `summary.json`'s scenarios.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    /// The case both files share (`redsync-extend-stolen-lock`).
    pub case: String,
    /// The library (or server) as its repository names it (`go-redsync/redsync`).
    pub library: String,
    /// The version this file runs (`v4.0.3`).
    pub version: String,
    /// `failing` or `fixed`.
    #[schemars(extend("enum" = ["failing", "fixed"]))]
    pub role: String,
    /// The issue or pull request that reported or fixed it.
    pub link: String,
    /// What goes wrong, in one sentence.
    pub mechanism: String,
}

impl Incident {
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("case", &self.case),
            ("library", &self.library),
            ("version", &self.version),
            ("link", &self.link),
            ("mechanism", &self.mechanism),
        ] {
            if value.trim().is_empty() {
                return Err(format!("incident.{field}: must not be empty"));
            }
        }
        if !["failing", "fixed"].contains(&self.role.as_str()) {
            return Err(format!(
                "incident.role: \"{}\" is not one of failing, fixed",
                self.role
            ));
        }
        if !self.link.starts_with("https://") {
            return Err(format!(
                "incident.link: \"{}\" is not an https:// link to the issue or pull request",
                self.link
            ));
        }
        Ok(())
    }

    pub fn failing(&self) -> bool {
        self.role == "failing"
    }
}

/// One side of a case as the report shows it: its version and how its seeds went.
struct Side<'a> {
    scenario: &'a str,
    version: &'a str,
    seeds_run: u64,
    violating: u64,
    timeline: Option<&'a str>,
}

/// The cases of a report, in report order: (case, failing side's incident, failing, fixed).
fn cases(s: &Summary) -> Vec<(&Incident, Option<Side<'_>>, Option<Side<'_>>)> {
    let mut order: Vec<&str> = Vec::new();
    for info in &s.scenarios {
        if let Some(i) = &info.incident
            && !order.contains(&i.case.as_str())
        {
            order.push(&i.case);
        }
    }
    order
        .into_iter()
        .filter_map(|case| {
            let side = |failing: bool| {
                let info = s.scenarios.iter().find(|info| {
                    info.incident
                        .as_ref()
                        .is_some_and(|i| i.case == case && i.failing() == failing)
                })?;
                let cells: Vec<_> = s
                    .cells
                    .iter()
                    .filter(|c| c.stats.scenario == info.name)
                    .collect();
                Some(Side {
                    scenario: &info.name,
                    version: &info.incident.as_ref()?.version,
                    seeds_run: cells.iter().map(|c| c.stats.seeds_run).sum(),
                    violating: cells
                        .iter()
                        .map(|c| c.expect_broken_seeds.as_ref().map_or(0, |v| v.len() as u64))
                        .sum(),
                    // The picture of a failing seed; a control that held has none to show (its
                    // cell's timeline is of a seed that broke something it does not judge).
                    timeline: cells
                        .iter()
                        .filter(|c| {
                            c.expect_broken_seeds
                                .as_ref()
                                .is_some_and(|v| !v.is_empty())
                        })
                        .find_map(|c| c.timeline.as_deref()),
                })
            };
            let (failing, fixed) = (side(true), side(false));
            let incident = s
                .scenarios
                .iter()
                .filter_map(|info| info.incident.as_ref())
                .filter(|i| i.case == case)
                .min_by_key(|i| !i.failing())?;
            Some((incident, failing, fixed))
        })
        .collect()
}

fn verdict(side: &Side) -> String {
    format!("{}/{} seeds violating", side.violating, side.seeds_run)
}

/// The incidents section as HTML (empty when the report has no incident scenarios).
pub fn html(s: &Summary) -> String {
    let cases = cases(s);
    if cases.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2 id=\"incidents\">Incidents: reported failures of real lock libraries</h2>\n<p class=\"meta\">Each case runs the failing version and the version (or setting) that fixed it; a seed is violating when a property its scenario judges is broken.</p>\n<table class=\"incidents\"><thead><tr><th>case</th><th>library</th><th>failing version</th><th>fixed control</th><th>mechanism</th></tr></thead><tbody>\n",
    );
    for (incident, failing, fixed) in cases {
        let cell = |side: &Option<Side>| match side {
            None => "<td>—</td>".to_string(),
            Some(side) => {
                let link = side.timeline.map_or(String::new(), |t| {
                    format!(" <a href=\"{}\">timeline</a>", esc(t))
                });
                format!(
                    "<td><code>{}</code><br>{} <span class=\"meta\">({})</span>{link}</td>",
                    esc(side.version),
                    esc(&verdict(side)),
                    esc(side.scenario)
                )
            }
        };
        let _ = writeln!(
            out,
            "<tr><td>{case}</td><td>{library}</td>{failing}{fixed}<td>{mechanism} <a href=\"{link}\">{link_text}</a></td></tr>",
            case = esc(&incident.case),
            library = esc(&incident.library),
            failing = cell(&failing),
            fixed = cell(&fixed),
            mechanism = esc(&incident.mechanism),
            link = esc(&incident.link),
            link_text = esc(link_label(&incident.link)),
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The incidents section as Markdown (empty when the report has no incident scenarios).
pub fn markdown(s: &Summary) -> String {
    let cases = cases(s);
    if cases.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Incidents: reported failures of real lock libraries\n\nEach case runs the failing version and the version (or setting) that fixed it; a seed is violating when a property its scenario judges is broken.\n\n| case | library | failing version | fixed control | mechanism |\n|---|---|---|---|---|\n",
    );
    for (incident, failing, fixed) in cases {
        let cell = |side: &Option<Side>| match side {
            None => "—".to_string(),
            Some(side) => {
                let link = side
                    .timeline
                    .map_or(String::new(), |t| format!(" ([timeline]({t}))"));
                format!(
                    "`{}`: {} (`{}`){link}",
                    side.version,
                    verdict(side),
                    side.scenario
                )
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} [{}]({}) |",
            incident.case,
            incident.library,
            cell(&failing),
            cell(&fixed),
            incident.mechanism.replace('|', "\\|"),
            link_label(&incident.link),
            incident.link
        );
    }
    out
}

/// `owner/repo#N` for a GitHub issue or pull request link, else the link itself.
fn link_label(link: &str) -> &str {
    link.strip_prefix("https://github.com/").unwrap_or(link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::tests::sample;
    use crate::summary::tests::{BAD, OK, result};
    use crate::summary::{Cell, CellStats, ScenarioInfo};

    fn incident(role: &str, version: &str) -> Incident {
        Incident {
            case: "redsync-extend".into(),
            library: "go-redsync/redsync".into(),
            version: version.into(),
            role: role.into(),
            link: "https://github.com/go-redsync/redsync/pull/61".into(),
            mechanism: "Extend | counts a refused touch".into(),
        }
    }

    /// The sample report plus one case: the failing version broke on 2 of 2 seeds (with a
    /// timeline), the fixed one on none.
    fn with_case() -> Summary {
        let mut s = sample();
        for (name, role, version, verdicts, broken) in [
            ("inc", "failing", "v4.0.3", BAD, vec![0, 1]),
            ("inc-fixed", "fixed", "v4.0.4", OK, vec![]),
        ] {
            s.scenarios.push(ScenarioInfo {
                matrix: None,
                name: name.into(),
                file: format!("scenarios/incidents/{name}.json"),
                description: String::new(),
                source: String::new(),
                seeds: "0..1".into(),
                incident: Some(incident(role, version)),
            });
            let runs: Vec<_> = (0..2)
                .map(|seed| result(name, "redlock", seed, verdicts, (1.0, 2.0)))
                .collect();
            s.cells.push(Cell {
                stats: CellStats::from_results(name, "redlock", &runs),
                mismatches: vec![],
                timeline: (role == "failing")
                    .then(|| format!("runs/{name}/redlock/seed-0/timeline.svg")),
                replay: None,
                expect_broken_seeds: Some(broken),
            });
        }
        s
    }

    #[test]
    fn one_row_per_case_with_both_versions_and_the_timeline() {
        let s = with_case();
        let html = html(&s);
        assert_eq!(html.matches("<tr><td>").count(), 1, "{html}");
        assert!(
            html.contains("<code>v4.0.3</code><br>2/2 seeds violating"),
            "{html}"
        );
        assert!(
            html.contains("<code>v4.0.4</code><br>0/2 seeds violating"),
            "{html}"
        );
        assert!(html.contains(r#"<a href="runs/inc/redlock/seed-0/timeline.svg">timeline</a>"#));
        assert!(
            !html.contains("runs/inc-fixed/"),
            "the control held: no timeline"
        );
        assert!(html.contains(">go-redsync/redsync/pull/61</a>"));
        let md = markdown(&s);
        assert!(md.contains("| redsync-extend | go-redsync/redsync | `v4.0.3`: 2/2 seeds violating (`inc`) ([timeline](runs/inc/redlock/seed-0/timeline.svg)) | `v4.0.4`: 0/2 seeds violating (`inc-fixed`) | Extend \\| counts"), "{md}");
        let charts = crate::charts::ChartSet::render(&s);
        assert!(crate::html::render(&s, &charts).contains("id=\"incidents\""));
        assert!(crate::markdown::render(&s, &charts).contains("## Incidents"));
    }

    #[test]
    fn reports_without_incidents_have_no_section() {
        assert!(html(&sample()).is_empty());
        assert!(markdown(&sample()).is_empty());
    }
}
