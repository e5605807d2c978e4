//! The incidents section: a row per case (`crate::incidents::cases`), each side with its two
//! counts — the reported failure, and anything broken when that differs.

use maud::{Markup, html};

use super::{Count, breakable, count};
use crate::incidents::{INTRO, Side, cases, link_label, reported};
use crate::matrix::cell_id;
use crate::summary::Summary;

fn side(side: &Option<Side>) -> Markup {
    let Some(side) = side else {
        return html! { td { "—" } };
    };
    html! {
        td {
            code { (breakable(side.version)) }
            @for cell in &side.cells {
                @let st = &cell.stats;
                div id=(cell_id(&st.scenario, &st.scheme)) {
                    "reported failure on " (count(cell, Count::Reported, &format!("{}/{}", reported(cell), st.seeds_run))) " seeds"
                    @if st.seeds_violating != reported(cell) {
                        br;
                        span.meta {
                            (count(cell, Count::Violating, &format!("{}/{}", st.seeds_violating, st.seeds_run)))
                            " broke something (" (st.outcome.as_str())
                            @if let Some(link) = &cell.timeline { ", " a href=(link) { "seed " (st.first_failing_seed.unwrap_or_default()) } }
                            ")"
                        }
                    }
                }
            }
            @if let Some(t) = side.timeline() { a href=(t) { "timeline" } }
            br;
            span.meta { "(" (breakable(side.scenario)) ")" }
        }
    }
}

/// The section (nothing when the report has no incident scenarios).
pub fn section(s: &Summary) -> Markup {
    let cases = cases(s);
    if cases.is_empty() {
        return html! {};
    }
    html! {
        h2 #incidents { "Incidents: reported failures of real lock libraries" }
        p.meta { (INTRO) }
        table.incidents {
            colgroup { col.case; col.lib; col.side; col.side; col.mech; }
            thead { tr { th { "case" } th { "library" } th { "failing version" } th { "fixed control" } th { "mechanism" } } }
            tbody {
                @for (incident, failing, fixed) in &cases {
                    tr {
                        td { (breakable(&incident.case)) }
                        td { (breakable(&incident.library)) }
                        (side(failing))
                        (side(fixed))
                        td { (incident.mechanism) " " a href=(incident.link) { (link_label(&incident.link)) } }
                    }
                }
            }
        }
    }
}
