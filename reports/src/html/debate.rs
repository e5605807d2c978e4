//! The debate as a table: each claim (`crate::debate::CLAIMS`) with the cells that test it and
//! the count of seeds that showed what it predicts.

use maud::{Markup, html};

use super::{Count, count};
use crate::debate::{CLAIMS, Predicts, Test, all_counts, judge, scenario_label};
use crate::matrix::cell_id;
use crate::summary::{Cell, Summary};

fn counted(predicts: Predicts) -> Count {
    match predicts {
        Predicts::Unsafe | Predicts::Safe => Count::Unsafe,
        Predicts::Corrupts | Predicts::ResourceSafe => Count::Lost,
        Predicts::Stuck | Predicts::Live => Count::Stuck,
    }
}

fn runs(test: &Test, cell: &Cell, ok: bool) -> Markup {
    let (k, words) = test.predicts.count(cell);
    let figure = format!("{k}/{}", cell.stats.seeds_run);
    html! {
        td class=(if ok { "agree" } else { "disagree" }) title=(all_counts(cell)) {
            (if ok { "✓ as claimed: " } else { "✗ not so: " })
            (count(cell, counted(test.predicts), &figure)) " seeds: " (words)
        }
    }
}

/// The section: nothing without matrix columns.
pub fn section(s: &Summary) -> Markup {
    if s.matrix_columns().is_empty() {
        return html! {};
    }
    html! {
        h2 #debate { "The debate, replayed" }
        p { "Each claim of Martin Kleppmann’s " i { "How to do distributed locking" } " (2016), antirez’s answer " i { "Is Redlock safe?" } " (2016), redis.io’s Redlock page and the five Chinese articles locksim started from (article 000 to 004), next to the cells that test it, with the seeds that showed what the claim is about (✓: the runs show what the claim predicts on these seeds; ✗: they do not). Claims are paraphrased; quotes are verbatim from the articles." }
        table.debate {
            thead { tr { th { "who" } th { "claim" } th { "tested on" } th { "predicts" } th { "the runs" } } }
            tbody {
                @for claim in CLAIMS {
                    @let tests: Vec<(&Test, &Cell, bool)> = claim.tests.iter().filter_map(|t| judge(s, t).map(|(c, ok)| (t, c, ok))).collect();
                    @for (i, (test, cell, ok)) in tests.iter().enumerate() {
                        tr {
                            @if i == 0 {
                                td.who rowspan=(tests.len()) { (claim.who) }
                                td rowspan=(tests.len()) {
                                    (claim.claim)
                                    @if let Some(q) = claim.quote { br; q { (q) } }
                                }
                            }
                            td { a href=(format!("#{}", cell_id(test.scenario, test.scheme))) { (test.scheme) " × " (scenario_label(s, test.scenario)) } }
                            td { (test.predicts.words()) }
                            (runs(test, cell, *ok))
                        }
                    }
                }
            }
        }
    }
}
