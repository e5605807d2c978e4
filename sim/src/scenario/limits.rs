//! How much one scenario may ask for, so that no input makes a run go on for hours or allocate
//! gigabytes: each limit is an error naming the field and the limit, as `clients.count` always
//! was. Every limit is far above what the catalog and ordinary use need (the catalog's largest
//! values are noted); the history's own budget (`world::history`) stops any run whose product
//! of fields still gets out of hand.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use serde_json::Value;

/// A scenario file is read whole: larger files are refused.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Any string of a scenario (a description, a script, a node name). Scheme parameters that are
/// lock keys or values have their own, smaller limit (`model::locks::params`).
pub const MAX_STRING_BYTES: usize = 64 << 10;

/// Any list of a scenario (faults, partition groups, nemesis nodes, script keys).
pub const MAX_LIST_ITEMS: usize = 10_000;

/// Any `*_ms` number (± one year): times are added, doubled and turned into microseconds, and
/// must stay far from overflowing.
pub const MAX_ANY_MS: u64 = 365 * 24 * 3_600_000;

/// `duration_ms`: one simulated hour (the catalog's longest run is 120 s).
pub const MAX_DURATION_MS: u64 = 3_600_000;

/// `clients.acquisitions` per worker thread (the catalog uses up to 100,000 to mean "until the
/// run ends").
pub const MAX_ACQUISITIONS: u32 = 1_000_000;

/// `clients.count × clients.threads`: lock owners, each polling the lock while it waits.
pub const MAX_LOCK_OWNERS: u32 = 1000;

/// Scripted `faults`: every recorded event is matched against each trigger still waiting.
pub const MAX_FAULTS: usize = 1000;

/// `schemes`: each is a whole run of the scenario (the catalog lists at most 15).
pub const MAX_SCHEMES: usize = 100;

/// The random nemesis's shortest `every_ms`: a fault every 10 ms is already a storm (thousands
/// per run), and the nemesis must not outpace the world it disturbs.
pub const MIN_NEMESIS_EVERY_MS: u64 = 10;

/// `clients.extend.every_ms`: each extension is a command round trip per master, and a
/// heartbeat every 10 ms is already a storm (the catalog's is 500 ms).
pub const MIN_EXTEND_EVERY_MS: u64 = 10;

/// `topology.lua_time_limit_work`: ten times the default budget (about ten seconds of one core
/// per script), or one runaway script per attempt could keep a run going for hours.
pub const MAX_LUA_WORK: u64 = 10 * model::redis::script_limits::DEFAULT_SCRIPT_WORK;

/// `topology.lua_memory_limit_mb`: Lua's heap per Redis node (the default is 1024); past a few
/// GiB one script could fill the machine.
pub const MAX_LUA_MEMORY_MB: u64 = 4096;

/// Links the network faults of one run may cut and heal (each change is about a microsecond,
/// and a partition of n nodes cuts up to n²/2): 1,000 clients split in two are 500,000 links.
pub const MAX_LINK_CHANGES: u64 = 2_000_000;

/// Seeds in one range (`seeds`, `--seeds`): a million runs is days of work for one scenario.
pub const MAX_SEEDS: u64 = 1_000_000;

/// Runs one command may start (scenarios × schemes × seeds): each is listed before the first
/// starts and its result kept (the whole catalog compared is 7,300).
pub const MAX_RUNS: u64 = 1_000_000;

/// Reads a scenario file whole: a regular file of at most [`MAX_FILE_BYTES`] bytes of UTF-8.
/// A device (`/dev/zero`, whose length reads 0) is read no further than the limit, and a FIFO
/// is opened without waiting for a writer and then refused, so no path makes a command read
/// for ever or block.
pub fn read_file(path: &Path) -> Result<String, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read: {e}"))?;
    let metadata = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(format!(
            "cannot read: {what}, not a scenario file (give a regular JSON file)"
        ));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "cannot read: not UTF-8 text (an invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_large(bytes: u64) -> String {
    format!("{bytes} bytes is too large for a scenario file (limit {MAX_FILE_BYTES} bytes)")
}

/// Checks the sizes every field shares before the file is read into its types: strings, lists,
/// `*_ms` numbers and `duration_ms`. Errors read `FIELD: PROBLEM (limit …)`.
pub fn check_sizes(value: &Value) -> Result<(), String> {
    walk(value, "", false)
}

fn walk(value: &Value, field: &str, in_ms: bool) -> Result<(), String> {
    let shown = |field: &str| {
        if field.is_empty() {
            "(the file)".to_string()
        } else {
            field.to_string()
        }
    };
    match value {
        Value::String(s) if s.len() > MAX_STRING_BYTES => Err(format!(
            "{}: a string of {} bytes (limit {MAX_STRING_BYTES} bytes)",
            shown(field),
            s.len()
        )),
        Value::Array(items) => {
            if items.len() > MAX_LIST_ITEMS {
                return Err(format!(
                    "{}: a list of {} items (limit {MAX_LIST_ITEMS})",
                    shown(field),
                    items.len()
                ));
            }
            items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| walk(item, &format!("{field}[{i}]"), in_ms))
        }
        Value::Object(map) => map.iter().try_for_each(|(key, item)| {
            let path = if field.is_empty() {
                key.clone()
            } else {
                format!("{field}.{key}")
            };
            walk(item, &path, key.ends_with("_ms"))
        }),
        Value::Number(n) if field == "duration_ms" => match n.as_u64() {
            Some(ms) if ms > MAX_DURATION_MS => Err(format!(
                "duration_ms: {ms} ms is longer than a run may be (limit {MAX_DURATION_MS} ms, one simulated hour)"
            )),
            _ => Ok(()),
        },
        Value::Number(n) if in_ms => {
            let within = n.as_f64().is_some_and(|ms| ms.abs() <= MAX_ANY_MS as f64);
            if within {
                Ok(())
            } else {
                Err(format!(
                    "{field}: {n} ms is more than a year (limit {MAX_ANY_MS} ms)"
                ))
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_name_the_field_and_the_limit() {
        assert!(check_sizes(&json!({"name": "x", "clients": {"hold_ms": [1, 2]}})).is_ok());
        assert_eq!(
            check_sizes(&json!({"scheme": {"name": "set", "value": "x".repeat(70_000)}}))
                .unwrap_err(),
            "scheme.value: a string of 70000 bytes (limit 65536 bytes)"
        );
        assert_eq!(
            check_sizes(&json!({"faults": [{"groups": [["a"], vec![0; 10_001]]}]})).unwrap_err(),
            "faults[0].groups[1]: a list of 10001 items (limit 10000)"
        );
        assert_eq!(
            check_sizes(&json!({"clients": {"hold_ms": [1, 1e15]}})).unwrap_err(),
            "clients.hold_ms[1]: 1000000000000000.0 ms is more than a year (limit 31536000000 ms)"
        );
        assert!(check_sizes(&json!({"faults": [{"delta_ms": -31_536_000_000i64}]})).is_ok());
        assert!(check_sizes(&json!({"faults": [{"delta_ms": -31_536_000_001i64}]})).is_err());
        assert!(check_sizes(&json!({"duration_ms": 3_600_000})).is_ok());
        assert_eq!(
            check_sizes(&json!({"duration_ms": 1_000_000_000_000_000u64})).unwrap_err(),
            "duration_ms: 1000000000000000 ms is longer than a run may be (limit 3600000 ms, one simulated hour)"
        );
    }
}
