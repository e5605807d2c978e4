//! Directed search (`locksim hunt FILE --toward MARK,MARK`): the user says "look near here" by
//! naming the marks of the path they suspect, in order, and hunt measures each run's progress
//! along it (AFLGo, Böhme et al. CCS 2017: a seed's distance to the target sites steers its
//! power schedule). A run's progress is how many of the marks it fired in that order (their
//! first hits, as `bench::took_path` reads a path), and where: the first hit of the last one
//! it reached. Parents are drawn from the entries of the furthest progress, and a run that
//! reaches the furthest progress so far anchors there (`anchor`), so that its children replay
//! it up to that mark and insert the next faults right after it. Without `--toward` the search
//! is blind: nothing here is used.

use model::marks::Mark;

use crate::hunt::features::Reached;

/// Share of the mutants whose parent is drawn from the entries of the furthest progress
/// (the others by rarity, as blind).
pub const FURTHEST_PARENT_SHARE: f64 = 0.75;

/// Share of the anchored children drawn from the anchors of the furthest progress while any
/// waits (the others from every anchor, as blind).
pub const FURTHEST_ANCHOR_SHARE: f64 = 0.75;

/// Share of the runs that are fresh draws while an anchor on the path waits: the path is
/// where the search was told to look (scripts/hunt-bench.sh, 20 campaigns: 0.1 and 0.5 took
/// 27 and 28.5 runs on clock-jump-then-pause, 60.5 and 58.5 on clock-jump-then-delay, against
/// 18 and 51.5 at 0.25).
pub const DIRECTED_FRESH_SHARE: f64 = 0.25;

/// Share of the learnt runs (not fresh) that are anchored children while an anchor on the
/// path waits.
pub const DIRECTED_ANCHOR_SHARE: f64 = 0.75;

/// How far a run went along `toward`: the number of its marks fired in that order (first
/// hits), and the first hit (µs) of the last one reached; `(0, None)` when it fired none of
/// them first.
pub fn progress(reached: &Reached, toward: &[Mark]) -> (usize, Option<(Mark, u64)>) {
    let k = fired_in_order(&reached.marks_in_order(), toward);
    let last = k
        .checked_sub(1)
        .map(|i| (toward[i], reached.first_us[&toward[i]]));
    (k, last)
}

/// How many marks of `path`, from its first, a run that fired `marks` (in the order of their
/// first hits) fired in that order, others between them allowed.
pub fn fired_in_order(marks: &[Mark], path: &[Mark]) -> usize {
    let mut fired = marks.iter();
    path.iter().take_while(|m| fired.any(|f| f == *m)).count()
}

/// Parses `--toward`'s mark names; an unknown one is an error naming the flag and the marks.
pub fn parse_marks(flag: &str, names: &[String]) -> Result<Vec<Mark>, String> {
    names
        .iter()
        .map(|name| {
            Mark::ALL
                .iter()
                .copied()
                .find(|m| m.name() == name)
                .ok_or_else(|| {
                    format!(
                        "{flag}: no mark is named '{name}' (marks: {})",
                        Mark::ALL
                            .iter()
                            .map(|m| m.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hunt::bench::took_path;

    fn reached(first: &[(Mark, u64)]) -> Reached {
        Reached {
            first_us: first.iter().copied().collect(),
            ..Reached::default()
        }
    }

    #[test]
    fn progress_counts_the_path_marks_fired_in_order_and_where_the_last_one_fired() {
        use Mark::{ClockJumpWhileHeld as J, LockKeyExpired as E};
        let path = [J, E];
        assert_eq!(progress(&reached(&[]), &path), (0, None));
        assert_eq!(
            progress(&reached(&[(Mark::AcquireGranted, 5), (J, 300)]), &path),
            (1, Some((J, 300)))
        );
        assert_eq!(
            progress(&reached(&[(J, 300), (E, 900)]), &path),
            (2, Some((E, 900)))
        );
        // The second mark first, then the first: only the first counts.
        assert_eq!(
            progress(&reached(&[(E, 100), (J, 300)]), &path),
            (1, Some((J, 300)))
        );
        // The second alone is no progress: the path starts with the first.
        assert_eq!(progress(&reached(&[(E, 100)]), &path), (0, None));
        // A full progress is exactly a run that took the path (`bench::took_path`).
        for first in [
            vec![(J, 1), (E, 2)],
            vec![(E, 1), (J, 2)],
            vec![(J, 1)],
            vec![(Mark::KeyExpired, 1), (J, 4), (E, 9)],
        ] {
            let r = reached(&first);
            assert_eq!(
                progress(&r, &path).0 == path.len(),
                took_path(&r.marks_in_order(), &path),
                "{first:?}"
            );
        }
    }

    #[test]
    fn an_unknown_mark_is_an_error_naming_the_flag() {
        let names = ["clock_jump_while_held".to_string(), "no_such".to_string()];
        let err = parse_marks("--toward", &names).expect_err("unknown");
        assert!(
            err.starts_with("--toward: no mark is named 'no_such'"),
            "{err}"
        );
        assert_eq!(
            parse_marks("--toward", &names[..1]),
            Ok(vec![Mark::ClockJumpWhileHeld])
        );
    }
}
