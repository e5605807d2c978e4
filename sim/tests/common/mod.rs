//! What the command tests share: the catalog's files, a fresh temporary folder, the binary.
#![allow(dead_code)] // each test crate uses some of these

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A file of the catalog (`scenarios/NAME`).
pub fn catalog(name: &str) -> PathBuf {
    repo().join("scenarios").join(name)
}

/// A fresh temporary folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("locksim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `locksim` binary with `args`, by its path (as a user runs `./target/release/locksim`:
/// the commands it prints start with that path; `CARGO` unset, else they would say `cargo run`).
pub fn locksim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_locksim"))
        .env_remove("CARGO")
        .args(args)
        .output()
        .expect("the locksim binary runs")
}

/// A `locksim serve` on a free loopback port, killed and reaped when dropped.
pub struct Serve {
    pub child: std::process::Child,
    pub port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `locksim serve --port P ARGS...` and waits until it accepts connections (another
/// process may take the port between our probe and its bind: then it tries another port).
pub fn serve(args: &[&str]) -> Serve {
    use std::net::{TcpListener, TcpStream};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    for _ in 0..10 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_locksim"))
            .arg("serve")
            .args(["--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("locksim runs");
        let mut server = Serve { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.child.try_wait() {
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("locksim serve did not start");
}

/// Everything `reports::audit` checks in a report folder written by `compare`: every count of
/// seeds on the page and in the terminal's lines (`terminal`, `compare::summary_text`) against
/// `summary.json`, the heat maps' figures, and the layout of every chart and every timeline
/// (no text over other text or off the canvas, no cell over another). Panics with every problem.
pub fn audit_report(dir: &std::path::Path, summary: &reports::summary::Summary, terminal: &str) {
    use reports::audit::{heat_map_problems, page_problems, svg_problems, terminal_problems};
    let mut problems = Vec::new();
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let (on_page, checked) = page_problems(&page, summary);
    assert!(checked > 0, "the page has counts");
    problems.extend(on_page);
    problems.extend(terminal_problems(terminal, summary));
    let mut svgs = Vec::new();
    collect_svgs(dir, &mut svgs);
    assert!(!svgs.is_empty(), "charts and timelines");
    for path in &svgs {
        let svg = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(dir).unwrap().display().to_string();
        let found = match name.as_str() {
            "charts/matrix.svg" => heat_map_problems(&svg, summary, true),
            "charts/violations.svg" => heat_map_problems(&svg, summary, false),
            _ => Ok(Vec::new()),
        }
        .and_then(|mut p| {
            p.extend(svg_problems(&svg)?);
            Ok(p)
        });
        match found {
            Ok(p) => problems.extend(p.into_iter().map(|p| format!("{name}: {p}"))),
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) in {}:\n{}",
        problems.len(),
        dir.display(),
        problems.join("\n")
    );
}

fn collect_svgs(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_svgs(&path, out);
        } else if path.extension().is_some_and(|e| e == "svg") {
            out.push(path);
        }
    }
}
