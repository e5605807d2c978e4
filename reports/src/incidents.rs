//! The incidents section of the report: reported failures of real lock libraries, each case a
//! failing version and its fixed control (`scenarios/incidents/`), one row per case.
//!
//! A scenario's `incident` object names the case both of its files share, the library, the
//! version the file runs, its `role` (`failing` | `fixed`), the issue or pull request and the
//! mechanism in one sentence (`summary::Incident`). The reported failure is counted on the seeds
//! where a property the file's `expect` names is broken (computed by `compare`,
//! `sim::scenario::expect::broken`): the failing version should show it on every seed, the
//! fixed one on none. Anything else a seed broke is counted as everywhere else
//! (`seeds_violating`), and shown beside it when the two differ.

use std::fmt::Write;

pub use crate::summary::Incident;
use crate::summary::{Cell, Summary};

/// One side of a case as the report shows it: its version and its cells (one per scheme the
/// file runs, usually one).
pub struct Side<'a> {
    pub scenario: &'a str,
    pub version: &'a str,
    pub cells: Vec<&'a Cell>,
}

/// Seeds on which a property the file's `expect` names broke: the reported failure (what the
/// fix fixes). The cell's `seeds_violating` counts anything judged, as everywhere else.
pub fn reported(cell: &Cell) -> u64 {
    cell.expect_broken_seeds
        .as_ref()
        .map_or(0, |seeds| seeds.len() as u64)
}

impl Side<'_> {
    /// The picture of a seed with the reported failure; a control that held has none to show
    /// here (its cell links the seed that broke something else).
    pub fn timeline(&self) -> Option<&str> {
        self.cells
            .iter()
            .filter(|c| reported(c) > 0)
            .find_map(|c| c.timeline.as_deref())
    }
}

/// One case: the failing side's incident, then the failing and the fixed side.
pub type Case<'a> = (&'a Incident, Option<Side<'a>>, Option<Side<'a>>);

/// The cases of a report, in report order.
pub fn cases(s: &Summary) -> Vec<Case<'_>> {
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
                Some(Side {
                    scenario: &info.name,
                    version: &info.incident.as_ref()?.version,
                    cells: s
                        .cells
                        .iter()
                        .filter(|c| c.stats.scenario == info.name)
                        .collect(),
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

/// A cell's two counts in words: the reported failure, and anything broken when that differs.
pub fn verdict(cell: &Cell) -> String {
    let st = &cell.stats;
    let mut text = format!(
        "reported failure on {}/{} seeds",
        reported(cell),
        st.seeds_run
    );
    if st.seeds_violating != reported(cell) {
        text.push_str(&format!(
            "; {}/{} seeds broke something ({})",
            st.seeds_violating,
            st.seeds_run,
            st.outcome.as_str()
        ));
    }
    text
}

/// The section's introduction: what each of the two counts counts.
pub const INTRO: &str = "Each case runs the failing version and the version (or setting) that fixed it. “Reported failure”: the seeds on which a property the case's scenario expects to hold broke — what the fix fixes. Where a scenario also breaks something it does not judge the fix by (a pause longer than the lease lets a second client in, whatever the version), the seeds that broke anything are counted too, as in the matrix, the catalog and the terminal.";

/// The incidents section as Markdown (empty when the report has no incident scenarios).
pub fn markdown(s: &Summary) -> String {
    let cases = cases(s);
    if cases.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "## Incidents: reported failures of real lock libraries\n\n{INTRO}\n\n| case | library | failing version | fixed control | mechanism |\n|---|---|---|---|---|\n"
    );
    for (incident, failing, fixed) in cases {
        let cell = |side: &Option<Side>| match side {
            None => "—".to_string(),
            Some(side) => {
                let link = side
                    .timeline()
                    .map_or(String::new(), |t| format!(" ([timeline]({t}))"));
                let verdicts: Vec<String> = side.cells.iter().map(|c| verdict(c)).collect();
                format!(
                    "`{}`: {} (`{}`){link}",
                    side.version,
                    verdicts.join("; "),
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
pub fn link_label(link: &str) -> &str {
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
                clients: 2,
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
    fn one_row_per_case_with_both_counts_and_the_timeline() {
        let mut s = with_case();
        // The control breaks something it is not judged by on one seed.
        let fixed = s
            .cells
            .iter_mut()
            .find(|c| c.stats.scenario == "inc-fixed")
            .unwrap();
        let runs = [
            result("inc-fixed", "redlock", 0, OK, (1.0, 2.0)),
            result(
                "inc-fixed",
                "redlock",
                1,
                crate::summary::tests::FENCED,
                (1.0, 2.0),
            ),
        ];
        fixed.stats = CellStats::from_results("inc-fixed", "redlock", &runs);
        let page = crate::html::render(&s, &crate::charts::ChartSet::render(&s));
        assert_eq!(
            page.matches("<tr><td>redsync-<wbr>extend</td>").count(),
            1,
            "{page}"
        );
        assert!(page.contains(r#"reported failure on <span class="n" data-cell="cell-inc--redlock" data-count="reported">2/2</span> seeds"#), "{page}");
        assert!(page.contains(r#"reported failure on <span class="n" data-cell="cell-inc-fixed--redlock" data-count="reported">0/2</span> seeds"#));
        assert!(page.contains(r#"<span class="n" data-cell="cell-inc-fixed--redlock" data-count="violating">1/2</span> broke something (overlap"#), "{page}");
        assert!(page.contains(r#"<a href="runs/inc/redlock/seed-0/timeline.svg">timeline</a>"#));
        assert!(page.contains(">go-redsync/redsync/pull/61</a>"));
        let (problems, _) = crate::audit::page_problems(&page, &s);
        assert!(problems.is_empty(), "{problems:#?}");
        let md = markdown(&s);
        assert!(md.contains("| redsync-extend | go-redsync/redsync | `v4.0.3`: reported failure on 2/2 seeds (`inc`) ([timeline](runs/inc/redlock/seed-0/timeline.svg)) | `v4.0.4`: reported failure on 0/2 seeds; 1/2 seeds broke something (overlap) (`inc-fixed`) | Extend \\| counts"), "{md}");
        assert!(
            crate::markdown::render(&s, &crate::charts::ChartSet::render(&s))
                .contains("## Incidents")
        );
    }

    #[test]
    fn reports_without_incidents_have_no_section() {
        assert!(cases(&sample()).is_empty());
        assert!(markdown(&sample()).is_empty());
    }
}
