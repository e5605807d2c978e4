//! The first screen: one block per use (`crate::advice`), the schemes that hold, then what
//! breaks each of the others, with the cost of the ones that hold.

use maud::{Markup, html};

use crate::advice::{Answer, answers, judged_on};
use crate::matrix::cost;
use crate::summary::{MatrixRow, Summary, fmt_ms};

fn holder(s: &Summary, row: &MatrixRow) -> Markup {
    let (lat, thr) = cost(s, &row.scheme);
    let mut price = Vec::new();
    if let Some((p50, _)) = lat {
        price.push(format!("{} ms alone", fmt_ms(p50)));
    }
    if let Some(t) = thr {
        price.push(format!("{t:.1} locks/s contended"));
    }
    html! {
        b { (row.scheme) }
        @if !price.is_empty() { " (" (price.join(", ")) ")" }
    }
}

/// Groups of broken schemes shown before the rest folds away (the closest first).
const SHOWN: usize = 3;

fn broken(groups: &[(String, Vec<&MatrixRow>)]) -> Markup {
    html! {
        ul.broken {
            @for (sentence, rows) in groups {
                li {
                    @for (i, row) in rows.iter().enumerate() {
                        @if i > 0 { ", " }
                        b { (row.scheme) }
                    }
                    ": " (sentence)
                }
            }
        }
    }
}

fn block(s: &Summary, answer: &Answer) -> Markup {
    html! {
        div.use id=(answer.what.anchor) {
            h3 { (answer.what.title) }
            p.needs { "Needs: " (answer.what.needs) "." }
            @if answer.hold.is_empty() {
                p."hold none" { b { "No scheme here holds." } " Closest first:" }
            } @else {
                p."hold some" {
                    "Holds on every seed: "
                    @for (i, row) in answer.hold.iter().enumerate() {
                        @if i > 0 { ", " }
                        (holder(s, row))
                    }
                }
                p.needs { "What breaks the others:" }
            }
            @let (first, rest) = answer.broken.split_at(answer.broken.len().min(SHOWN));
            (broken(first))
            @if !rest.is_empty() {
                details {
                    summary { (rest.iter().map(|(_, rows)| rows.len()).sum::<usize>()) " more schemes, broken by more columns" }
                    (broken(rest))
                }
            }
            p.judged { "Judged on the matrix columns " (judged_on(answer)) "." }
        }
    }
}

/// The first section: nothing without matrix columns.
pub fn section(s: &Summary) -> Markup {
    let answers = answers(s);
    html! {
        @if !answers.is_empty() {
            h2 #advice { "Which lock should you use?" }
            p { "Read from the fault matrix below: per use, the schemes that held on every seed of every column that bears on it, then, for every other scheme, what broke it (“two holders”: two clients held the lock at once; “lost updates”: a write was lost; “stuck”: nobody got the lock again). Each answer is only as wide as the faults this matrix injects." }
            div.uses { @for answer in &answers { (block(s, answer)) } }
        }
    }
}
