//! The keyspace of one database: values plus absolute expiry times in wall-clock ms
//! (`db.c`, `expire.c`). Expiry *policy* (lazy deletion, replicas, propagation) lives in the
//! server; this module only stores and samples.

use std::collections::{BTreeSet, HashMap, VecDeque};

use foldhash::fast::FixedState;

use super::types::{HashValue, SetValue, ZSet};

/// A Redis value. Strings are binary-safe byte strings.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    Hash(HashValue),
    List(VecDeque<Vec<u8>>),
    Set(SetValue),
    ZSet(ZSet),
}

impl Value {
    /// The name `TYPE` prints.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// Aggregates that became empty are removed from the keyspace, as Redis does.
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub value: Value,
    /// Absolute Unix time in ms; the key is logically expired iff `now > expire_at`.
    pub expire_at: Option<i64>,
}

/// One database. Keys with an expiry are also kept in `volatile`, ordered by a seeded hash of the
/// key: the stand-in for the `db->expires` hash table that `activeExpireCycle` scans with a cursor.
///
/// The keys themselves are in a hash table, as Redis's `db->dict` (`dict.c`, keyed at start-up:
/// `server.c` `dictSetHashFunctionSeed`; here by the server's seed, a scenario's in the
/// simulation, the start time in `locksim serve`): a lookup hashes the key once, where an
/// ordered map compared it with ~17 others at 100,000 keys (half of `locksim serve`'s time
/// under `redis-benchmark -r 100000 SET key val NX PX`, issue 32), with foldhash rather than
/// std's SipHash (6 hashes per SET NX PX, 14 % of its instructions). Its order never shows:
/// every walk over the keys goes through [`Db::keys`] (byte order) or the seeded orders below.
#[derive(Clone, Debug, Default)]
pub struct Db {
    entries: HashMap<Vec<u8>, Entry, FixedState>,
    volatile: BTreeSet<(u64, Vec<u8>)>,
    hash_seed: u64,
    expire_cursor: Option<(u64, Vec<u8>)>,
    /// Every key by its SCAN slot, built by this database's first SCAN and kept up to date from
    /// then on, so a SCAN call walks a range of it (O(log n + COUNT)) instead of hashing every
    /// key (a full SCAN of 100,000 keys took 28 s that way). The simulation never SCANs, so its
    /// nodes never pay for it.
    scan_order: Option<BTreeSet<(u64, Vec<u8>)>>,
}

impl Db {
    pub fn new(hash_seed: u64) -> Self {
        Db {
            entries: HashMap::with_hasher(FixedState::with_seed(hash_seed)),
            hash_seed,
            ..Db::default()
        }
    }

    fn slot(&self, key: &[u8]) -> (u64, Vec<u8>) {
        (seeded_hash(self.hash_seed, key), key.to_vec())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn volatile_len(&self) -> usize {
        self.volatile.len()
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.entries.get_mut(key)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.entries.contains_key(key)
    }

    /// `db.c` `setKey`: overwrite the value; the TTL is dropped unless `keep_ttl`.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        match self.entries.get_mut(key) {
            Some(entry) => {
                entry.value = value;
                if !keep_ttl && entry.expire_at.take().is_some() {
                    let slot = self.slot(key);
                    self.volatile.remove(&slot);
                }
            }
            None => {
                self.add_to_scan_order(key);
                self.entries.insert(
                    key.to_vec(),
                    Entry {
                        value,
                        expire_at: None,
                    },
                );
            }
        }
    }

    /// Adds a new key (the caller checked it is absent) and returns its value for filling in.
    pub fn insert_new(&mut self, key: &[u8], value: Value) -> &mut Value {
        if !self.entries.contains_key(key) {
            self.add_to_scan_order(key);
        }
        &mut self
            .entries
            .entry(key.to_vec())
            .or_insert(Entry {
                value,
                expire_at: None,
            })
            .value
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        if let Some(order) = &mut self.scan_order {
            order.remove(&(scan_slot(key), key.to_vec()));
        }
        if entry.expire_at.is_some() {
            let slot = self.slot(key);
            self.volatile.remove(&slot);
        }
        Some(entry)
    }

    /// Removes the key if its aggregate value became empty.
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.value.is_empty_aggregate())
        {
            self.remove(key);
            true
        } else {
            false
        }
    }

    pub fn set_expire(&mut self, key: &[u8], when: i64) {
        let slot = self.slot(key);
        if let Some(entry) = self.entries.get_mut(key) {
            entry.expire_at = Some(when);
            self.volatile.insert(slot);
        }
    }

    /// Removes the TTL; true if there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let slot = self.slot(key);
        match self.entries.get_mut(key) {
            Some(entry) if entry.expire_at.is_some() => {
                entry.expire_at = None;
                self.volatile.remove(&slot);
                true
            }
            _ => false,
        }
    }

    pub fn expire_of(&self, key: &[u8]) -> Option<i64> {
        self.entries.get(key).and_then(|e| e.expire_at)
    }

    /// `db.c` `keyIsExpired`: expired iff it has a TTL and `now > when`.
    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        self.expire_of(key).is_some_and(|when| now_ms > when)
    }

    pub fn clear(&mut self) {
        // A new table, not an emptied one: FLUSHALL gives the table's memory back (`dictEmpty`).
        self.entries = HashMap::with_hasher(self.entries.hasher().clone());
        self.volatile.clear();
        self.expire_cursor = None;
        self.scan_order = None;
    }

    fn add_to_scan_order(&mut self, key: &[u8]) {
        if let Some(order) = &mut self.scan_order {
            order.insert((scan_slot(key), key.to_vec()));
        }
    }

    /// One SCAN call over the keys, the walk `commands::keys::scan_walk` makes over any
    /// collection (same batches, same cursors), on the kept slot order.
    pub fn scan_keys(&mut self, cursor: u64, count: usize) -> (Vec<Vec<u8>>, u64) {
        let entries = &self.entries;
        let order = self.scan_order.get_or_insert_with(|| {
            entries
                .keys()
                .map(|key| (scan_slot(key), key.clone()))
                .collect()
        });
        let mut from = order.range((cursor, Vec::new())..).peekable();
        let mut keys: Vec<(u64, &Vec<u8>)> = Vec::new();
        while keys.len() < count {
            match from.next() {
                Some((slot, key)) => keys.push((*slot, key)),
                None => break,
            }
        }
        let Some(&&(pivot, _)) = from.peek() else {
            return (keys.into_iter().map(|(_, k)| k.clone()).collect(), 0);
        };
        if keys.first().is_some_and(|(slot, _)| *slot < pivot) {
            // Never split a slot: the keys sharing the next key's slot wait for the next call.
            keys.retain(|(slot, _)| *slot < pivot);
            return (keys.into_iter().map(|(_, k)| k.clone()).collect(), pivot);
        }
        // COUNT keys, all in one slot: the whole slot goes now.
        keys.extend(
            from.by_ref()
                .take_while(|(slot, _)| *slot == pivot)
                .map(|(s, k)| (*s, k)),
        );
        let next = order
            .range((pivot + 1, Vec::new())..)
            .next()
            .map_or(0, |(slot, _)| *slot);
        (keys.into_iter().map(|(_, k)| k.clone()).collect(), next)
    }

    /// Up to `count` keys with a TTL, continuing a cursor scan of the volatile set (wrapping
    /// around once), like `activeExpireCycle` walking `db->expires` buckets.
    pub fn sample_volatile(&mut self, count: usize) -> Vec<Vec<u8>> {
        if self.volatile.is_empty() {
            // The common case, 16 databases × 10 cycles a second on every node: no allocation.
            self.expire_cursor = None;
            return Vec::new();
        }
        let mut out = Vec::with_capacity(count);
        let total = self.volatile.len().min(count);
        let start = self.expire_cursor.take();
        let after: Vec<(u64, Vec<u8>)> = match &start {
            Some(cursor) => self
                .volatile
                .range((
                    std::ops::Bound::Excluded(cursor.clone()),
                    std::ops::Bound::Unbounded,
                ))
                .take(total)
                .cloned()
                .collect(),
            None => self.volatile.iter().take(total).cloned().collect(),
        };
        let mut picked = after;
        if picked.len() < total {
            let missing = total - picked.len();
            let wrapped: Vec<(u64, Vec<u8>)> = self
                .volatile
                .iter()
                .take_while(|slot| start.as_ref().is_none_or(|c| *slot <= c))
                .take(missing)
                .cloned()
                .collect();
            picked.extend(wrapped);
        }
        self.expire_cursor = picked.last().cloned();
        out.extend(picked.into_iter().map(|(_, key)| key));
        out
    }

    /// All keys, in byte order (sorted here: the hash table's own order is per process).
    pub fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        let mut keys: Vec<&Vec<u8>> = self.entries.keys().collect();
        keys.sort_unstable();
        keys.into_iter()
    }
}

/// Where an element sits in a SCAN walk (keys, and the members or fields of a hash-table
/// collection): a fixed hash of it, never 0 (the cursor that starts and ends a walk) and below
/// 2^63 (clients parse cursors as signed integers).
pub fn scan_slot(element: &[u8]) -> u64 {
    (seeded_hash(0, element) >> 1).max(1)
}

/// A deterministic 64-bit hash (FNV-1a, then a splitmix64 finaliser keyed by the seed).
pub fn seeded_hash(seed: u64, key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = h
        .wrapping_add(seed.rotate_left(17))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_drops_ttl_unless_kept() {
        let mut db = Db::new(1);
        db.set(b"k", Value::Str(b"v".to_vec()), false);
        db.set_expire(b"k", 100);
        db.set(b"k", Value::Str(b"w".to_vec()), true);
        assert_eq!(db.expire_of(b"k"), Some(100));
        db.set(b"k", Value::Str(b"x".to_vec()), false);
        assert_eq!(db.expire_of(b"k"), None);
        assert_eq!(db.volatile_len(), 0);
    }

    #[test]
    fn sampling_walks_every_volatile_key() {
        let mut db = Db::new(7);
        for i in 0..50 {
            let key = format!("k{i}").into_bytes();
            db.set(&key, Value::Str(vec![]), false);
            db.set_expire(&key, i);
        }
        let mut seen = BTreeSet::new();
        for _ in 0..5 {
            let sample = db.sample_volatile(10);
            assert_eq!(sample.len(), 10);
            seen.extend(sample);
        }
        assert_eq!(seen.len(), 50);
        assert_eq!(db.sample_volatile(20).len(), 20);
    }
}
