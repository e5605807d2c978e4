//! Aggregate value types: hashes (`t_hash.c`) and sorted sets (`t_zset.c`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// A hash in field insertion order, as a listpack-encoded Redis hash replies to HGETALL.
/// (Redis switches to a hash table past 128 fields, whose order is unspecified; we keep
/// insertion order throughout.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HashValue {
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl HashValue {
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets a field in place (or appends it); true if it is new.
    pub fn set(&mut self, field: &[u8], value: Vec<u8>) -> bool {
        match self.fields.iter_mut().find(|(f, _)| f == field) {
            Some((_, v)) => {
                *v = value;
                false
            }
            None => {
                self.fields.push((field.to_vec(), value));
                true
            }
        }
    }

    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.fields.iter().position(|(f, _)| f == field) {
            Some(i) => {
                self.fields.remove(i);
                true
            }
            None => false,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &(Vec<u8>, Vec<u8>)> {
        self.fields.iter()
    }
}

/// A score and member, ordered as the skiplist orders them: by score, then by member bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    pub score: f64,
    pub member: Vec<u8>,
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| self.member.cmp(&other.member))
    }
}

/// A sorted set: member → score plus the (score, member) order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
    order: BTreeSet<Scored>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Inserts or re-scores a member. A score of -0 is stored as 0, as Redis replies it.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let score = score + 0.0;
        if let Some(old) = self.scores.insert(member.to_vec(), score) {
            self.order.remove(&Scored {
                score: old,
                member: member.to_vec(),
            });
        }
        self.order.insert(Scored {
            score,
            member: member.to_vec(),
        });
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(old) => {
                self.order.remove(&Scored {
                    score: old,
                    member: member.to_vec(),
                });
                true
            }
            None => false,
        }
    }

    /// Members in ascending (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Scored> {
        self.order.iter()
    }

    /// `zsetRank`: the 0-based position of a member, from the lowest score or the highest.
    pub fn rank(&self, member: &[u8], reverse: bool) -> Option<usize> {
        let score = self.score(member)?;
        let below = self
            .order
            .range(
                ..Scored {
                    score,
                    member: member.to_vec(),
                },
            )
            .count();
        Some(if reverse {
            self.len() - 1 - below
        } else {
            below
        })
    }

    /// Removes and returns the lowest (or, with `max`, the highest) member.
    pub fn pop(&mut self, max: bool) -> Option<Scored> {
        let first = if max {
            self.order.pop_last()
        } else {
            self.order.pop_first()
        }?;
        self.scores.remove(&first.member);
        Some(first)
    }
}
