//! Aggregate value types: hashes (`t_hash.c`), sets (`t_set.c`) and sorted sets (`t_zset.c`).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, btree_set};

use super::number::string2ll;

/// A hash in field insertion order, as a listpack-encoded Redis hash replies to HGETALL.
/// (Redis switches to a hash table past 128 fields, whose order is unspecified; we keep
/// insertion order throughout.)
#[derive(Clone, Debug, Default)]
pub struct HashValue {
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// Encoded as a hash table rather than a listpack (`hashTypeConvert`, one-way): HSCAN
    /// answers a listpack whole.
    table: bool,
}

/// `hash-max-listpack-entries` and `hash-max-listpack-value` (also the zset ones), defaults.
pub const MAX_LISTPACK_ENTRIES: usize = 128;
pub const MAX_LISTPACK_VALUE: usize = 64;

/// Equal contents, whatever the encoding (an AOF reload may encode a value differently).
impl PartialEq for HashValue {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
    }
}

impl Eq for HashValue {}

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

    /// True once the hash is a hash table (see `table`).
    pub fn is_table(&self) -> bool {
        self.table
    }

    /// Sets a field in place (or appends it); true if it is new. A field or value longer than
    /// 64 bytes, or a 129th field, converts a listpack (`hashTypeTryConversion`, `hashTypeSet`).
    pub fn set(&mut self, field: &[u8], value: Vec<u8>) -> bool {
        if field.len() > MAX_LISTPACK_VALUE || value.len() > MAX_LISTPACK_VALUE {
            self.table = true;
        }
        let new = self.set_field(field, value);
        if self.fields.len() > MAX_LISTPACK_ENTRIES {
            self.table = true;
        }
        new
    }

    fn set_field(&mut self, field: &[u8], value: Vec<u8>) -> bool {
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
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
    order: BTreeSet<Scored>,
    /// Encoded as a skiplist rather than a listpack (`zsetConvert`, one-way): ZSCAN answers a
    /// listpack whole, and only a skiplist keeps a score of -0.
    table: bool,
}

/// Equal contents, whatever the encoding.
impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.scores == other.scores && self.order == other.order
    }
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

    /// True once the sorted set is a skiplist (see `table`).
    pub fn is_table(&self) -> bool {
        self.table
    }

    /// `zsetConvert` to a skiplist, as SORT does to any sorted set it reads (`sort.c`).
    pub fn convert_to_table(&mut self) {
        self.table = true;
    }

    /// Inserts or re-scores a member. A new member longer than 64 bytes, or a 129th one,
    /// converts a listpack first (`zsetAdd`). A listpack stores a score of -0 as 0 (as `d2string`
    /// text), a skiplist keeps it (ZSCORE answers `-0`).
    pub fn insert(&mut self, member: &[u8], score: f64) {
        if !self.scores.contains_key(member)
            && (member.len() > MAX_LISTPACK_VALUE || self.scores.len() >= MAX_LISTPACK_ENTRIES)
        {
            self.table = true;
        }
        let score = if self.table { score } else { score + 0.0 };
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

/// `set-max-intset-entries` (default 512): an intset longer than this becomes a hash table.
pub const SET_MAX_INTSET_ENTRIES: usize = 512;

/// A set as Redis 7.0 encodes it (`t_set.c`), because the encoding decides the order of every
/// reply that lists members: an intset (members that are all `string2ll`-exact integers, at most
/// `set-max-intset-entries`) lists them in ascending numeric order; a hash table lists them in
/// an order that is random per process, for which we keep byte order. The conversion is one-way
/// (`setTypeConvert`), even when SREM later leaves only integers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetValue {
    Ints(BTreeSet<i64>),
    Table(BTreeSet<Vec<u8>>),
}

/// An empty intset: `createIntsetObject`, where SINTERSTORE, SUNION and SDIFF build results.
impl Default for SetValue {
    fn default() -> Self {
        SetValue::Ints(BTreeSet::new())
    }
}

impl SetValue {
    /// `setTypeCreate`: the encoding a new key gets from its first member.
    pub fn for_member(member: &[u8]) -> Self {
        if string2ll(member).is_some() {
            SetValue::default()
        } else {
            SetValue::Table(BTreeSet::new())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetValue::Ints(s) => s.len(),
            SetValue::Table(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True while the set is an intset (its members list in numeric order).
    pub fn is_intset(&self) -> bool {
        matches!(self, SetValue::Ints(_))
    }

    /// `setTypeIsMember`.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(s) => string2ll(member).is_some_and(|v| s.contains(&v)),
            SetValue::Table(s) => s.contains(member),
        }
    }

    /// `setTypeAdd`: true if the member is new. A non-integer member, or one member too many,
    /// turns an intset into a hash table for good.
    pub fn add(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(s) => match string2ll(member) {
                Some(v) => {
                    if !s.insert(v) {
                        return false;
                    }
                    if s.len() > SET_MAX_INTSET_ENTRIES {
                        self.convert();
                    }
                    true
                }
                None => {
                    self.convert();
                    self.add(member)
                }
            },
            SetValue::Table(s) => s.insert(member.to_vec()),
        }
    }

    /// `setTypeRemove`: true if the member was there. Never converts back to an intset.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(s) => string2ll(member).is_some_and(|v| s.remove(&v)),
            SetValue::Table(s) => s.remove(member),
        }
    }

    /// The member at `index` of the iteration order (`setTypeRandomElement` with a random
    /// index; O(n) here where Redis picks a bucket in O(1)).
    pub fn nth(&self, index: usize) -> Option<Vec<u8>> {
        match self {
            SetValue::Ints(s) => s.iter().nth(index).map(|v| v.to_string().into_bytes()),
            SetValue::Table(s) => s.iter().nth(index).cloned(),
        }
    }

    /// `setTypeConvert` to a hash table.
    fn convert(&mut self) {
        if let SetValue::Ints(s) = self {
            let table = s.iter().map(|v| v.to_string().into_bytes()).collect();
            *self = SetValue::Table(table);
        }
    }

    /// The members in iteration order (`setTypeNext`), integers as `sdsfromlonglong` prints them.
    pub fn iter(&self) -> SetIter<'_> {
        match self {
            SetValue::Ints(s) => SetIter::Ints(s.iter()),
            SetValue::Table(s) => SetIter::Table(s.iter()),
        }
    }
}

/// The iterator of [`SetValue::iter`].
pub enum SetIter<'a> {
    Ints(btree_set::Iter<'a, i64>),
    Table(btree_set::Iter<'a, Vec<u8>>),
}

impl<'a> Iterator for SetIter<'a> {
    type Item = Cow<'a, [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            SetIter::Ints(it) => it.next().map(|v| Cow::Owned(v.to_string().into_bytes())),
            SetIter::Table(it) => it.next().map(|m| Cow::Borrowed(m.as_slice())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_keep_intset_order_until_converted_for_good() {
        let mut s = SetValue::for_member(b"10");
        assert!(s.add(b"10") && s.add(b"-3") && s.add(b"2") && !s.add(b"2"));
        let members: Vec<_> = s.iter().map(|m| m.into_owned()).collect();
        assert_eq!(members, [b"-3".to_vec(), b"2".to_vec(), b"10".to_vec()]);
        assert!(s.is_intset() && !s.contains(b"02") && s.contains(b"-3"));
        assert!(s.add(b"x") && !s.is_intset());
        assert!(s.remove(b"x") && !s.is_intset());
        let mut big = SetValue::default();
        for i in 0..=SET_MAX_INTSET_ENTRIES {
            big.add(i.to_string().as_bytes());
        }
        assert!(!big.is_intset() && big.len() == SET_MAX_INTSET_ENTRIES + 1);
        assert!(!SetValue::for_member(b"-0").is_intset());
    }

    #[test]
    fn hashes_and_zsets_leave_the_listpack_for_good() {
        let mut h = HashValue::default();
        for i in 0..MAX_LISTPACK_ENTRIES {
            h.set(format!("f{i}").as_bytes(), vec![b'v'; MAX_LISTPACK_VALUE]);
        }
        assert!(!h.is_table());
        h.set(b"one more", Vec::new());
        assert!(h.is_table() && h.remove(b"one more") && h.is_table());
        let mut long = HashValue::default();
        long.set(b"f", vec![b'v'; MAX_LISTPACK_VALUE + 1]);
        assert!(long.is_table() && long == long.clone());

        let mut z = ZSet::default();
        z.insert(b"a", -0.0);
        assert!(!z.is_table() && z.score(b"a").unwrap().is_sign_positive());
        for i in 1..MAX_LISTPACK_ENTRIES {
            z.insert(i.to_string().as_bytes(), 1.0);
        }
        z.insert(b"a", 2.0);
        assert!(!z.is_table());
        z.insert(&[b'm'; MAX_LISTPACK_VALUE + 1], 1.0);
        z.insert(b"a", -0.0);
        assert!(z.is_table() && z.score(b"a").unwrap().is_sign_negative());
    }
}
