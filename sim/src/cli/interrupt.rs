//! Ctrl-C for long commands (`sweep`, `compare`, `check`): the first one sets a flag, so the
//! runs in progress finish, nothing new starts, and the command keeps and reports what finished;
//! a second Ctrl-C quits at once (results already streamed to disk stay there).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// The flag long commands poll between runs.
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// Installs the SIGINT handler (once per process; later calls do nothing).
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!(
                "\nlocksim: interrupted: finishing the runs in progress and keeping what finished (Ctrl-C again to quit now)"
            );
        } else {
            std::process::exit(130);
        }
    });
}
