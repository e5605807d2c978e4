//! Storage: every node's disk, which outlives the node's process.
//!
//! A disk holds the append-only file in two parts — what was fsynced (`durable`) and what was
//! only written to the OS (`page_cache`) — and the small config files a process rewrites and
//! fsyncs at once (redis.conf's `replicaof`, sentinel.conf). How a Redis process fills the AOF
//! is `nodes::redis::persistence`; what is on the disk, and what a crash leaves of it, is here.
//!
//! Fault hook: `power_loss` (the machine goes down: the page cache is lost). A `crash` (the
//! process dies, `kill -9`) leaves the disk alone: the kernel keeps the page cache and writes
//! it back, so the restarted process reads it (measured: redis-server 7.0.15 with
//! `appendfsync everysec` or `no` keeps an acknowledged `SET` across `kill -9`, docs/fidelity.md).

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One command as written to the AOF (its arguments).
pub type Command = Vec<Vec<u8>>;

/// One node's disk.
#[derive(Default)]
pub struct Disk {
    /// The AOF as it is on disk (fsynced).
    pub durable: Vec<Command>,
    /// Written to the OS but not yet on disk: read back after a process crash, lost when the
    /// machine loses power.
    pub page_cache: Vec<Command>,
    /// redis.conf's `replicaof`: the master's node name, `None` for a master.
    pub replicaof: Option<String>,
    /// Other config files by name (`sentinel.conf`), each in the format of the process that
    /// writes it.
    files: BTreeMap<&'static str, Box<dyn Any + Send>>,
}

impl Disk {
    /// The file `name` as last written, if it was and holds a `T`.
    pub fn read<T: Clone + 'static>(&self, name: &str) -> Option<T> {
        self.files.get(name)?.downcast_ref::<T>().cloned()
    }

    /// Rewrites the file `name` (written and fsynced at once, as `sentinelFlushConfig` does).
    pub fn write<T: Send + 'static>(&mut self, name: &'static str, content: T) {
        self.files.insert(name, Box::new(content));
    }
}

/// Every node's disk, created empty on first use.
#[derive(Default)]
pub struct Disks {
    disks: Mutex<BTreeMap<String, Disk>>,
}

impl Disks {
    pub fn with<R>(&self, node: &str, f: impl FnOnce(&mut Disk) -> R) -> R {
        let mut disks = self.disks.lock().expect("never poisoned");
        f(disks.entry(node.to_string()).or_default())
    }

    /// The machine lost power: whatever was not on disk is gone.
    pub fn power_loss(&self, node: &str) {
        self.with(node, |disk| {
            if !disk.page_cache.is_empty() {
                model::marks::mark(model::marks::Mark::AofTailLost);
            }
            disk.page_cache.clear()
        });
    }
}
