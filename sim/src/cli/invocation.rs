//! How the user ran locksim, so that every command locksim prints — the replay of a failing
//! seed, the merge of shards, the check of a shrunk scenario — runs as printed (issue 30): a
//! newcomer who followed the README ran `cargo run --release -- compare` and has no `locksim` on
//! PATH. `main` records the invocation once ([`record`]); commands print [`command`]s.
//!
//! - run by name (`locksim …`, found on PATH): `locksim`;
//! - run by cargo (`cargo run [--release] -- …`: cargo sets `CARGO` for what it runs, and the
//!   binary is cargo's own, `<target>/release/locksim` or `<target>/debug/locksim`):
//!   `cargo run --release --` or `cargo run --`;
//! - run by a path (`./target/release/locksim …`): that path, quoted for the shell.
//!
//! In-process use (tests, the library) prints `locksim`.

use std::path::Path;
use std::sync::OnceLock;

use crate::cli::artifacts::shell_quote;

static PREFIX: OnceLock<String> = OnceLock::new();

/// The words that start a command, from how this process was run: its `argv[0]`, its
/// executable's path and whether cargo ran it.
pub fn detect(argv0: &str, exe: Option<&Path>, run_by_cargo: bool) -> String {
    if !argv0.contains('/') {
        return "locksim".into();
    }
    let profile = exe
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|p| p.to_str());
    match profile {
        Some("release") if run_by_cargo => "cargo run --release --".into(),
        Some("debug") if run_by_cargo => "cargo run --".into(),
        _ => shell_quote(argv0),
    }
}

/// Records how this process was run (once, from `main`).
pub fn record() {
    let argv0 = std::env::args().next().unwrap_or_default();
    let exe = std::env::current_exe().ok();
    let cargo = std::env::var_os("CARGO").is_some();
    let _ = PREFIX.set(detect(&argv0, exe.as_deref(), cargo));
}

/// `args` as a command that runs the way this process was run (`locksim replay …`,
/// `cargo run --release -- replay …`).
pub fn command(args: &str) -> String {
    format!("{} {args}", PREFIX.get().map_or("locksim", String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_start_the_way_locksim_was_run() {
        let release = Path::new("/src/locksim/target/release/locksim");
        assert_eq!(detect("locksim", Some(release), false), "locksim");
        assert_eq!(
            detect("/src/locksim/target/release/locksim", Some(release), true),
            "cargo run --release --"
        );
        assert_eq!(
            detect(
                "target/debug/locksim",
                Some(Path::new("/src/locksim/target/debug/locksim")),
                true
            ),
            "cargo run --"
        );
        assert_eq!(
            detect("./target/release/locksim", Some(release), false),
            "./target/release/locksim"
        );
        assert_eq!(
            detect(
                "/opt/my tools/locksim",
                Some(Path::new("/opt/my tools/locksim")),
                true
            ),
            "'/opt/my tools/locksim'"
        );
        assert_eq!(
            command("replay a.json --seed 1"),
            "locksim replay a.json --seed 1"
        );
    }
}
