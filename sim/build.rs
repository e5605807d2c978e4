//! Compiles `clock-shift/clock_shift.c`, the LD_PRELOAD shim that gives a real redis-server or
//! redis-sentinel its own clock (`live::clock_shift`), with the system's C compiler (`cc`, which
//! the Rust toolchain needs to link anyway). The library is embedded in the binary, which
//! writes it out next to the processes it starts: a copied `locksim` needs no compiler.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "clock-shift/clock_shift.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("libclockshift.so");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&library)
        .arg(source)
        .arg("-ldl")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{compiler} {source} failed ({s}): see the compiler's messages above"),
        Err(e) => panic!(
            "cannot run the C compiler `{compiler}` for {source}: {e} (install gcc, or set CC)"
        ),
    }
}
