//! The report's first screen: "which lock should I use, and what breaks it?", answered per use
//! from the measured fault matrix — the schemes that held on every seed of every column that
//! bears on the use, then, for every other scheme, the sentence that says what broke it
//! (`matrix::breaks_among`). Nothing here names a scheme or a verdict: the answer is read from
//! the runs, so it stays true when the schemes, the columns or the simulator change.

use std::fmt::Write;

use crate::matrix::{BASELINE_FAMILY, breaks_among, family, ordered_columns};
use crate::summary::{MatrixRow, Outcome, ScenarioInfo, Summary};

/// What a lock is used for, and what fails that use.
pub struct Use {
    /// The anchor of its block on the page.
    pub anchor: &'static str,
    pub title: &'static str,
    /// What the use needs of the lock, in one sentence.
    pub needs: &'static str,
    /// The fault families that bear on it (the fault-free columns always do); `None`: all.
    pub families: Option<&'static [&'static str]>,
    /// The outcomes that fail it.
    pub fails: &'static [Outcome],
}

/// The three uses of issue 30: a lease relied on alone, a lease behind a resource that checks
/// fencing tokens (Kleppmann 2016), and a lock that must outlive its Redis master.
pub const USES: &[Use] = &[
    Use {
        anchor: "use-lease",
        title: "A lease that must never overlap",
        needs: "the lock alone keeps everyone else out: never two holders, never a lost update, never stuck for good — under every fault class",
        families: None,
        fails: &[Outcome::Corrupted, Outcome::Overlap, Outcome::Stuck],
    },
    Use {
        anchor: "use-token",
        title: "A lock whose resource checks a token",
        needs: "the resource refuses a write that carries an older token than one it has seen, so two holders may overlap for a while, but no update may be lost and the lock may not stay stuck — under every fault class",
        families: None,
        fails: &[Outcome::Corrupted, Outcome::Stuck],
    },
    Use {
        anchor: "use-failover",
        title: "A lock that must survive a failover",
        needs: "never two holders, never a lost update, never stuck when a Sentinel promotes a replica or the network splits the Redis servers (pauses, delays, crashes and clocks aside)",
        families: Some(&["failover"]),
        fails: &[Outcome::Corrupted, Outcome::Overlap, Outcome::Stuck],
    },
];

/// One use, answered.
pub struct Answer<'a> {
    pub what: &'static Use,
    /// The matrix columns it is judged on.
    pub columns: Vec<&'a ScenarioInfo>,
    /// The rows that held on every seed of every one of those columns.
    pub hold: Vec<&'a MatrixRow>,
    /// Every other row, grouped by the sentence that says what broke it, the rows broken by
    /// the fewest columns first.
    pub broken: Vec<(String, Vec<&'a MatrixRow>)>,
}

/// The columns a use is judged on: the fault-free ones and those of its families.
fn columns_for<'a>(s: &'a Summary, what: &Use) -> Vec<&'a ScenarioInfo> {
    ordered_columns(s)
        .into_iter()
        .filter(|c| {
            let fam = family(c);
            fam == BASELINE_FAMILY || what.families.is_none_or(|f| f.contains(&fam))
        })
        .collect()
}

/// Every use that has columns in this report, answered from its cells.
pub fn answers(s: &Summary) -> Vec<Answer<'_>> {
    USES.iter()
        .filter_map(|what| {
            let columns = columns_for(s, what);
            if !columns.iter().any(|c| family(c) != BASELINE_FAMILY) {
                return None;
            }
            let mut hold = Vec::new();
            let mut broken: Vec<(usize, String, Vec<&MatrixRow>)> = Vec::new();
            for row in &s.matrix_rows {
                let parts = breaks_among(s, &row.scheme, &columns, what.fails);
                if parts.is_empty() {
                    hold.push(row);
                    continue;
                }
                let failing = columns
                    .iter()
                    .filter(|c| {
                        s.cell(&c.name, &row.scheme)
                            .is_some_and(|cell| what.fails.contains(&cell.stats.outcome))
                    })
                    .count();
                let sentence = parts.join("; ");
                match broken.iter_mut().find(|(_, s, _)| *s == sentence) {
                    Some((_, _, rows)) => rows.push(row),
                    None => broken.push((failing, sentence, vec![row])),
                }
            }
            broken.sort_by_key(|(failing, _, _)| *failing);
            Some(Answer {
                what,
                columns,
                hold,
                broken: broken
                    .into_iter()
                    .map(|(_, sentence, rows)| (sentence, rows))
                    .collect(),
            })
        })
        .collect()
}

/// Row names joined for a sentence.
pub fn names(rows: &[&MatrixRow]) -> String {
    rows.iter()
        .map(|r| r.scheme.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns an answer is judged on, for its caption.
pub fn judged_on(answer: &Answer) -> String {
    answer
        .columns
        .iter()
        .map(|c| crate::matrix::short(c))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The answers in Markdown.
pub fn markdown(s: &Summary, out: &mut String) {
    for answer in answers(s) {
        let _ = writeln!(out, "### {}\n", answer.what.title);
        let _ = writeln!(
            out,
            "Needs: {}. Judged on: {}.\n",
            answer.what.needs,
            judged_on(&answer)
        );
        if answer.hold.is_empty() {
            let _ = writeln!(out, "- **Holds: none** of the schemes in this report.");
        } else {
            let _ = writeln!(out, "- **Holds**: {}", names(&answer.hold));
        }
        for (sentence, rows) in &answer.broken {
            let _ = writeln!(out, "- {}: {sentence}", names(rows));
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::tests::{cell, column, sample};
    use crate::summary::tests::{BAD, FENCED, OK};

    #[test]
    fn each_use_is_answered_from_the_cells() {
        let mut s = sample();
        s.scenarios
            .push(column("m-fo", "failover", "failover", false));
        s.cells.push(cell("m-fo", "setnx-del", &[(OK, 0), (OK, 1)]));
        s.cells
            .push(cell("m-fo", "fencing", &[(FENCED, 0), (OK, 1)]));
        let answers = answers(&s);
        assert_eq!(answers.len(), 3);
        // A lease alone: fencing overlapped under the pause; setnx-del held everywhere.
        let lease = &answers[0];
        assert_eq!(names(&lease.hold), "setnx-del");
        assert_eq!(lease.broken.len(), 1);
        assert!(
            lease.broken[0]
                .0
                .starts_with("two holders (no update lost) under GC pause")
        );
        // Behind a token check the overlap is harmless; the random pause's lost update is not.
        let token = &answers[1];
        assert_eq!(names(&token.hold), "setnx-del");
        assert_eq!(token.broken[0].0, "random faults: random pauses 25%");
        // The failover use is judged on the fault-free and failover columns only.
        let failover = &answers[2];
        assert_eq!(judged_on(failover), "one client · no faults · failover");
        assert_eq!(
            failover.broken[0].0,
            "two holders (no update lost) under failover"
        );
        let mut md = String::new();
        markdown(&s, &mut md);
        assert!(md.contains("### A lock that must survive a failover"));
        assert!(md.contains("- **Holds**: setnx-del"));
    }

    #[test]
    fn rows_broken_the_same_way_share_a_sentence_fewest_failures_first() {
        let mut s = sample();
        s.matrix_rows.push(crate::summary::MatrixRow {
            scheme: "set".into(),
            family: "SET".into(),
            lease: true,
        });
        for col in ["m-one", "m-none", "m-pause"] {
            s.cells.push(cell(col, "set", &[(BAD, 0)]));
        }
        s.cells.push(cell("m-rand", "set", &[(BAD, 0)]));
        let lease = &answers(&s)[0];
        assert_eq!(lease.hold.len(), 1);
        assert_eq!(names(&lease.broken[0].1), "fencing");
        assert!(
            lease.broken[1]
                .0
                .starts_with("lost updates with no fault at all")
        );
        assert_eq!(names(&lease.broken[1].1), "set");
    }
}
