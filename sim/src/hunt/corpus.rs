//! The corpus: the fault schedules that reached a feature no run before them had (AFL keeps an
//! input that covers a new edge; Mallory one that reaches a new event pair), and how often
//! every feature was reached, so that parents are chosen by the rarity of their rarest feature
//! (AFLFast's "rare branch" power schedule, Böhme et al. CCS 2016): an entry whose rarest
//! feature was reached `n` times is drawn with weight 1/n.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::hunt::anchor::roulette;
use crate::hunt::features::Reached;
use crate::scenario::faults::Fault;

/// A kept schedule: its faults, the seed it ran on and what it reached.
#[derive(Clone, Debug)]
pub struct Entry {
    pub faults: Vec<Fault>,
    pub seed: u64,
    pub features: BTreeSet<String>,
    pub watermarks: Watermarks,
    /// How far its run went along `--toward`'s path (`directed::progress`; 0 when blind).
    pub progress: usize,
}

/// A run's watermarks (`features::Reached`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    pub least_write_margin_ms: Option<i64>,
    pub least_grant_validity_ms: Option<i64>,
    pub largest_failover_lag_ms: Option<i64>,
}

impl Watermarks {
    pub fn of(reached: &Reached) -> Watermarks {
        Watermarks {
            least_write_margin_ms: reached.least_write_margin_ms,
            least_grant_validity_ms: reached.least_grant_validity_ms,
            largest_failover_lag_ms: reached.largest_failover_lag_ms,
        }
    }
}

/// The watermarks parents are chosen by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watermark {
    WriteMargin,
    GrantValidity,
    FailoverLag,
}

impl Watermark {
    pub const ALL: [Watermark; 3] = [
        Watermark::WriteMargin,
        Watermark::GrantValidity,
        Watermark::FailoverLag,
    ];

    /// The entry's value, as a key where lower is closer to a violation.
    fn closeness(self, w: &Watermarks) -> Option<i64> {
        match self {
            Watermark::WriteMargin => w.least_write_margin_ms,
            Watermark::GrantValidity => w.least_grant_validity_ms,
            Watermark::FailoverLag => w.largest_failover_lag_ms.map(|lag| -lag),
        }
    }
}

#[derive(Default)]
pub struct Corpus {
    pub entries: Vec<Entry>,
    /// Runs that reached each feature.
    pub hits: BTreeMap<String, u64>,
}

impl Corpus {
    /// Counts a run's features; the ones no run had reached before, in order.
    pub fn count(&mut self, features: &BTreeSet<String>) -> Vec<String> {
        let mut new = Vec::new();
        for f in features {
            let n = self.hits.entry(f.clone()).or_default();
            if *n == 0 {
                new.push(f.clone());
            }
            *n += 1;
        }
        new
    }

    /// How many runs reached the entry's rarest feature.
    fn rarest(&self, entry: &Entry) -> u64 {
        entry
            .features
            .iter()
            .map(|f| self.hits.get(f).copied().unwrap_or(1).max(1))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// A parent, drawn with weight 1 / (runs that reached its rarest feature); `None` when
    /// the corpus is empty.
    pub fn choose(&self, rng: &mut ChaCha8Rng) -> Option<&Entry> {
        let weights: Vec<f64> = self
            .entries
            .iter()
            .map(|e| 1.0 / self.rarest(e) as f64)
            .collect();
        let total: f64 = weights.iter().sum();
        if self.entries.is_empty() || total <= 0.0 {
            return None;
        }
        Some(&self.entries[roulette(&weights, rng)])
    }

    /// A parent among the entries of the furthest progress along `--toward`'s path (at least
    /// 1), drawn by rarity as [`Corpus::choose`]; `None` when no entry made progress.
    pub fn choose_furthest(&self, rng: &mut ChaCha8Rng) -> Option<&Entry> {
        let furthest = self.entries.iter().map(|e| e.progress).max()?;
        if furthest == 0 {
            return None;
        }
        let of: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.progress == furthest)
            .collect();
        let weights: Vec<f64> = of.iter().map(|e| 1.0 / self.rarest(e) as f64).collect();
        Some(of[roulette(&weights, rng)])
    }

    /// The entry with the best of `watermark` (the earliest of equals); `None` when no entry's
    /// run has that watermark.
    pub fn best_by(&self, watermark: Watermark) -> Option<&Entry> {
        self.entries
            .iter()
            .filter_map(|e| watermark.closeness(&e.watermarks).map(|m| (m, e)))
            .min_by_key(|(m, _)| *m)
            .map(|(_, e)| e)
    }

    /// Any entry, uniformly (a splice partner).
    pub fn any(&self, rng: &mut ChaCha8Rng) -> Option<&Entry> {
        (!self.entries.is_empty()).then(|| &self.entries[rng.gen_range(0..self.entries.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn entry(seed: u64, features: &[&str]) -> Entry {
        Entry {
            faults: Vec::new(),
            seed,
            features: features.iter().map(|f| f.to_string()).collect(),
            watermarks: Watermarks::default(),
            progress: 0,
        }
    }

    #[test]
    fn new_features_are_reported_once_and_rare_entries_are_chosen_more() {
        let mut corpus = Corpus::default();
        let common: BTreeSet<String> = ["m:a".to_string()].into();
        assert_eq!(corpus.count(&common), vec!["m:a".to_string()]);
        for _ in 0..98 {
            assert!(corpus.count(&common).is_empty());
        }
        let rare: BTreeSet<String> = ["m:a".to_string(), "m:b".to_string()].into();
        assert_eq!(corpus.count(&rare), vec!["m:b".to_string()]);
        corpus.entries = vec![entry(1, &["m:a"]), entry(2, &["m:a", "m:b"])];
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let rare_picks = (0..1000)
            .filter(|_| corpus.choose(&mut rng).expect("not empty").seed == 2)
            .count();
        // Weights 1/100 and 1/1: the rare entry about 99 % of the time.
        assert!(rare_picks > 950, "{rare_picks}");
        // No progress along a path: no furthest parent.
        assert!(corpus.choose_furthest(&mut rng).is_none());
        // The common entry went further along it: always the furthest parent.
        corpus.entries[0].progress = 2;
        corpus.entries[1].progress = 1;
        assert!((0..50).all(|_| corpus.choose_furthest(&mut rng).expect("progress").seed == 1));
    }
}
