//! A real redis-server's or redis-sentinel's own clock: `clock_jump` and `clock_drift` of a
//! server node on real processes.
//!
//! libfaketime cannot do it: Debian's jemalloc-built redis-server 7.0.15 aborts at start under
//! it ("Unexpected recursive calls to clock_gettime()"), measured with every setting that could
//! avoid the recursion (`FAKETIME_DONT_FAKE_MONOTONIC=1`, `FAKETIME_NO_CACHE=1`,
//! `libfaketimeMT.so.1`, `FAKETIME=+100s` instead of a file). So every Redis and Sentinel
//! process runs with our own LD_PRELOAD shim (`sim/clock-shift/clock_shift.c`, compiled by
//! `sim/build.rs` with `cc` and embedded here), which shifts `clock_gettime`, `gettimeofday`
//! and `time` by what its clock file says, without allocating. [`ClockFile`] writes that file
//! (a record under a sequence lock, read through a shared mapping at every call): a jump
//! moves the wall clock only (the monotonic clock ignores a step, as with a real NTP step);
//! a drift makes both run at `rate` from now on, the shim extrapolating between writes, so no
//! thread has to keep advancing it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::live::pacer::{real_now_us, real_unix_us};

/// The shim, compiled by `sim/build.rs`.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libclockshift.so"));

/// The environment variable naming a process's clock file (read by the shim).
pub const FILE_ENV: &str = "LOCKSIM_CLOCK_FILE";

/// The shim's file name, both on disk and in `/proc/<pid>/maps`.
const LIBRARY_NAME: &str = "libclockshift.so";

/// Writes the shim into `dir` (once per cluster) and returns its path.
pub fn install_library(dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join(LIBRARY_NAME);
    std::fs::write(&path, LIBRARY)
        .map_err(|e| format!("cannot write the clock shim {}: {e}", path.display()))?;
    Ok(path)
}

/// Whether process `pid` has the shim loaded (a static binary ignores LD_PRELOAD).
pub fn loaded_in(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains(LIBRARY_NAME))
}

/// One process's clock: the file its shim reads, and the shift last written.
pub struct ClockFile {
    path: PathBuf,
    file: File,
    seq: u64,
    wall_offset_ns: i64,
    mono_offset_ns: i64,
    mono_anchor_ns: i64,
    rate: f64,
}

impl ClockFile {
    /// A clock at true time (an all-zero record): kept across the process's restarts, as a
    /// machine's clock outlives a process.
    pub fn create(path: PathBuf) -> Result<ClockFile, String> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| format!("cannot create the clock file {}: {e}", path.display()))?;
        file.write_all_at(&[0; RECORD_BYTES], 0)
            .map_err(|e| format!("cannot write the clock file {}: {e}", path.display()))?;
        Ok(ClockFile {
            path,
            file,
            seq: 0,
            wall_offset_ns: 0,
            mono_offset_ns: 0,
            mono_anchor_ns: 0,
            rate: 1.0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// From now on the process's wall clock reads true time + `offset_ms`, and both its clocks
    /// run at `rate` × true time (the simulation's `Time` listener: offset and rate after every
    /// change).
    pub fn set(&mut self, offset_ms: i64, rate: f64) -> Result<(), String> {
        let wall_now_ns = real_unix_us() as i64 * 1000;
        let mono_now_ns = real_now_us() as i64 * 1000;
        // The monotonic clock keeps the drift it accumulated at the old rate.
        if self.seq > 0 {
            self.mono_offset_ns +=
                ((self.rate - 1.0) * (mono_now_ns - self.mono_anchor_ns) as f64) as i64;
        }
        self.wall_offset_ns = offset_ms.saturating_mul(1_000_000);
        self.mono_anchor_ns = mono_now_ns;
        self.rate = rate;
        let mut record = [0u8; RECORD_BYTES];
        for (i, field) in [
            self.wall_offset_ns,
            self.mono_offset_ns,
            wall_now_ns,
            mono_now_ns,
        ]
        .iter()
        .enumerate()
        {
            record[8 + 8 * i..16 + 8 * i].copy_from_slice(&field.to_ne_bytes());
        }
        record[40..48].copy_from_slice(&rate.to_ne_bytes());
        // The sequence lock: odd while the fields change (the shim retries), even after.
        let write = |bytes: &[u8], at: u64| {
            self.file
                .write_all_at(bytes, at)
                .map_err(|e| format!("cannot write the clock file {}: {e}", self.path.display()))
        };
        write(&(self.seq + 1).to_ne_bytes(), 0)?;
        write(&record[8..], 8)?;
        self.seq += 2;
        write(&self.seq.to_ne_bytes(), 0)
    }
}

/// `u64 seq; i64 wall_offset_ns, mono_offset_ns, wall_anchor_ns, mono_anchor_ns; f64 rate`.
const RECORD_BYTES: usize = 48;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_holds_the_offset_the_anchors_and_the_rate() {
        let dir = std::env::temp_dir().join(format!("locksim-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut clock = ClockFile::create(dir.join("clock")).unwrap();
        clock.set(5000, 1.0).unwrap();
        clock.set(5000, 2.0).unwrap();
        let bytes = std::fs::read(clock.path()).unwrap();
        let field = |i: usize| i64::from_ne_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
        assert_eq!(field(0), 4, "two writes, each leaving the sequence even");
        assert_eq!(field(1), 5_000_000_000);
        assert_eq!(field(2), 0, "a jump leaves the monotonic clock alone");
        assert!(field(3) > 1_600_000_000_000_000_000, "a Unix time in ns");
        assert_eq!(f64::from_ne_bytes(bytes[40..48].try_into().unwrap()), 2.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
