//! Ranges a scenario writes: seeds (`"0..19"`, both ends included) and milliseconds
//! (`[min, max]` or one number).

use serde::Deserialize;
use serde_json::Value;

use crate::scenario::limits::MAX_SEEDS;

/// An inclusive seed range, written `"A..B"` (both ends included, so `"0..19"` is 20 seeds) or
/// a single number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub first: u64,
    pub last: u64,
}

impl SeedRange {
    pub fn parse(text: &str) -> Result<SeedRange, String> {
        let bad = || {
            format!(
                "\"{text}\" is not a seed range (write \"A..B\", both ends included, or one seed)"
            )
        };
        let range = match text.split_once("..") {
            Some((a, b)) => {
                let b = b.strip_prefix('=').unwrap_or(b);
                SeedRange {
                    first: a.trim().parse().map_err(|_| bad())?,
                    last: b.trim().parse().map_err(|_| bad())?,
                }
            }
            None => {
                let seed = text.trim().parse().map_err(|_| bad())?;
                SeedRange {
                    first: seed,
                    last: seed,
                }
            }
        };
        if range.first > range.last {
            return Err(format!("\"{text}\": the first seed is after the last"));
        }
        if range.last - range.first >= MAX_SEEDS {
            return Err(format!(
                "\"{text}\": {} seeds (limit {MAX_SEEDS} in one range)",
                u128::from(range.last - range.first) + 1
            ));
        }
        Ok(range)
    }

    pub fn iter(self) -> impl Iterator<Item = u64> {
        self.first..=self.last
    }

    pub fn len(self) -> u64 {
        self.last - self.first + 1
    }

    pub fn is_empty(self) -> bool {
        false
    }
}

impl std::fmt::Display for SeedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{}", self.first, self.last)
    }
}

/// `[min, max]` milliseconds (inclusive), or one number for a fixed value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsRange {
    pub min: u64,
    pub max: u64,
}

impl<'de> Deserialize<'de> for MsRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::Number(n) => {
                let v = n.as_u64().ok_or_else(|| {
                    D::Error::custom(format!("expected milliseconds ≥ 0, got {n}"))
                })?;
                Ok(MsRange { min: v, max: v })
            }
            Value::Array(items) if items.len() == 2 => {
                let get = |v: &Value| {
                    v.as_u64().ok_or_else(|| {
                        D::Error::custom(format!("expected milliseconds ≥ 0, got {v}"))
                    })
                };
                let (min, max) = (get(&items[0])?, get(&items[1])?);
                if min > max {
                    return Err(D::Error::custom(format!(
                        "[{min}, {max}]: min is greater than max"
                    )));
                }
                Ok(MsRange { min, max })
            }
            other => Err(D::Error::custom(format!(
                "expected [min, max] in ms or a number, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_include_both_ends() {
        assert_eq!(SeedRange::parse("0..19").unwrap().len(), 20);
        assert_eq!(SeedRange::parse("0..=19").unwrap().len(), 20);
        assert_eq!(
            SeedRange::parse("7").unwrap().iter().collect::<Vec<_>>(),
            vec![7]
        );
        assert!(SeedRange::parse("a..b").is_err());
        assert_eq!(SeedRange::parse("5..1000004").unwrap().len(), 1_000_000);
        assert_eq!(
            SeedRange::parse("0..18446744073709551615").unwrap_err(),
            "\"0..18446744073709551615\": 18446744073709551616 seeds (limit 1000000 in one range)"
        );
    }
}
