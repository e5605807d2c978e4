//! `--shard I/N` (`sweep`, `compare`, `check`): one of N disjoint parts of the (scenario,
//! scheme, seed) runs, so that many machines — a Kubernetes Indexed Job's pods — share one
//! batch, and `locksim report` merges their results.
//!
//! A run belongs to shard `SHA-1(scenario, scheme label, seed) mod N`: a function of the run
//! itself, not of its position in a list, so adding a scenario file or a folder (or reordering
//! them) moves no other run to another shard, and every machine agrees without talking.
//! `--shard env/N` (or `env`, with N in `LOCKSIM_SHARD_COUNT`) takes I from
//! `JOB_COMPLETION_INDEX`, which Kubernetes sets in each pod of an Indexed Job.

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

/// The environment variable Kubernetes sets to a pod's index in an Indexed Job.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Where `--shard env` reads the number of shards.
pub const COUNT_ENV: &str = "LOCKSIM_SHARD_COUNT";

/// Shard `index` of `count` (0 ≤ index < count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// Parses `--shard`: `I/N`, `env/N` or `env`; `var` looks up environment variables.
    pub fn parse(text: &str, var: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let bad = |why: String| format!("--shard: \"{text}\": {why}");
        let (index, count) = match text.split_once('/') {
            Some((index, count)) => (index.trim(), count.trim().to_string()),
            None if text.trim() == "env" => (
                "env",
                var(COUNT_ENV).ok_or_else(|| {
                    bad(format!(
                        "{COUNT_ENV} is not set (write env/N to give the number of shards)"
                    ))
                })?,
            ),
            None => return Err(bad("write I/N (0 ≤ I < N), env/N or env".into())),
        };
        let index = if index == "env" {
            var(INDEX_ENV).ok_or_else(|| {
                bad(format!(
                    "{INDEX_ENV} is not set (Kubernetes sets it in an Indexed Job's pods)"
                ))
            })?
        } else {
            index.to_string()
        };
        let index: u64 = index
            .trim()
            .parse()
            .map_err(|_| bad(format!("the index \"{index}\" is not a number")))?;
        let count: u64 = count
            .parse()
            .map_err(|_| bad(format!("the count \"{count}\" is not a number")))?;
        if count == 0 || index >= count {
            return Err(bad(format!(
                "the index must be below the count, got {index} of {count}"
            )));
        }
        Ok(Shard { index, count })
    }

    /// `--shard` from the command line, with the process's environment.
    pub fn from_arg(text: Option<&str>) -> Result<Option<Shard>, String> {
        text.map(|t| Shard::parse(t, |name| std::env::var(name).ok()))
            .transpose()
    }

    /// Which shard of `count` one run belongs to.
    pub fn of(scenario: &str, scheme: &str, seed: u64, count: u64) -> u64 {
        let digest = Sha1::new()
            .chain_update(scenario.as_bytes())
            .chain_update([0])
            .chain_update(scheme.as_bytes())
            .chain_update([0])
            .chain_update(seed.to_string().as_bytes())
            .finalize();
        let first: [u8; 8] = digest[..8].try_into().expect("SHA-1 has 20 bytes");
        u64::from_be_bytes(first) % count
    }

    /// Whether this shard runs the run.
    pub fn holds(&self, scenario: &str, scheme: &str, seed: u64) -> bool {
        Shard::of(scenario, scheme, seed, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(index: Option<&str>, count: Option<&str>) -> impl Fn(&str) -> Option<String> {
        let (index, count) = (index.map(String::from), count.map(String::from));
        move |name| match name {
            INDEX_ENV => index.clone(),
            COUNT_ENV => count.clone(),
            _ => None,
        }
    }

    #[test]
    fn shards_parse_from_the_argument_or_the_indexed_job() {
        let none = env(None, None);
        assert_eq!(
            Shard::parse("2/8", &none).unwrap(),
            Shard { index: 2, count: 8 }
        );
        assert_eq!(
            Shard::parse("env/8", env(Some("7"), None)).unwrap(),
            Shard { index: 7, count: 8 }
        );
        assert_eq!(
            Shard::parse("env", env(Some("0"), Some("3"))).unwrap(),
            Shard { index: 0, count: 3 }
        );
        for (text, why) in [
            ("8/8", "the index must be below the count"),
            ("1/0", "the index must be below the count"),
            ("x/2", "the index \"x\" is not a number"),
            ("3", "write I/N"),
            ("env/4", "JOB_COMPLETION_INDEX is not set"),
            ("env", "LOCKSIM_SHARD_COUNT is not set"),
        ] {
            let err = Shard::parse(text, &none).unwrap_err();
            assert!(err.starts_with(&format!("--shard: \"{text}\": ")), "{err}");
            assert!(err.contains(why), "{err}");
        }
    }

    /// Every run lands in exactly one shard, the shards are of similar size, and a run's
    /// shard depends on the run alone.
    #[test]
    fn every_run_is_in_exactly_one_shard() {
        let count = 4;
        let mut sizes = [0u64; 4];
        for scenario in ["a", "b", "kleppmann-gc-pause"] {
            for scheme in ["set-nx-px-lua", "redlock:redsync"] {
                for seed in 0..200 {
                    let shards: Vec<u64> = (0..count)
                        .filter(|&index| Shard { index, count }.holds(scenario, scheme, seed))
                        .collect();
                    assert_eq!(shards.len(), 1);
                    sizes[shards[0] as usize] += 1;
                }
            }
        }
        assert!(sizes.iter().all(|&n| n > 240 && n < 360), "{sizes:?}");
        assert_eq!(
            Shard::of("a", "set", 5, 1000),
            Shard::of("a", "set", 5, 1000)
        );
    }
}
