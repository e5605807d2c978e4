//! The build of Lua 5.1.5 that `mlua-sys`'s build script asks for
//! (`lua_src::Build::new().build(lua_src::Lua51)`, then `print_cargo_metadata`), from the sources
//! in `lua-5.1.5/` next to this crate: lua-src 551.0.2's Lua 5.1.5 with Redis's security fixes
//! (`README.md`). Only what `mlua-sys` 0.13 calls for Lua 5.1 on Unix is here; the flags are
//! lua-src's (`src/lib.rs` of lua-src 551.0.2), so the library is built as before.

use std::env;
use std::path::{Path, PathBuf};

/// The Lua versions this crate builds: only 5.1.
#[derive(Debug, PartialEq, Eq)]
pub enum Version {
    Lua51,
}
pub use Version::*;

/// How to build Lua: everything comes from the build script's environment.
#[derive(Default)]
pub struct Build {}

/// Where the library and its headers are.
pub struct Artifacts {
    include_dir: PathBuf,
    lib_dir: PathBuf,
    lib_name: &'static str,
}

impl Build {
    pub fn new() -> Build {
        Build {}
    }

    /// Compiles every `.c` of `lua-5.1.5/` into `$OUT_DIR/lib/liblua5.1.a` and copies the public
    /// headers to `$OUT_DIR/include`. Panics (the build fails) with the reason.
    pub fn build(&self, version: Version) -> Artifacts {
        let Lua51 = version;
        let out_dir =
            PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
        let target = env::var("TARGET").expect("TARGET is set for build scripts");
        let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua-5.1.5");
        let lib_dir = out_dir.join("lib");
        let include_dir = out_dir.join("include");
        std::fs::create_dir_all(&include_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", include_dir.display()));
        let lib_name = "lua5.1";
        let mut config = cc::Build::new();
        config.warnings(false).cargo_metadata(false).target(&target);
        if target.contains("linux") || target.contains("bsd") || target.contains("darwin") {
            config.define("LUA_USE_LINUX", None);
        } else {
            panic!("don't know how to build Lua for {target}");
        }
        // lua-src checks the API in builds with debug assertions (LUA_USE_APICHECK).
        if cfg!(debug_assertions) {
            config.define("LUA_USE_APICHECK", None);
            config.debug(true);
        }
        let mut sources: Vec<PathBuf> = std::fs::read_dir(&source_dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", source_dir.display()))
            .map(|entry| entry.expect("a readable directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "c"))
            .collect();
        sources.sort();
        config
            .include(&source_dir)
            .flag_if_supported("-fno-common")
            .files(&sources)
            .out_dir(&lib_dir)
            .compile(lib_name);
        for header in ["lauxlib.h", "lua.h", "luaconf.h", "lualib.h"] {
            let (from, to) = (source_dir.join(header), include_dir.join(header));
            std::fs::copy(&from, &to).unwrap_or_else(|e| {
                panic!("cannot copy {} to {}: {e}", from.display(), to.display())
            });
        }
        println!("cargo:rerun-if-changed={}", source_dir.display());
        Artifacts {
            include_dir,
            lib_dir,
            lib_name,
        }
    }
}

impl Artifacts {
    pub fn include_dir(&self) -> &Path {
        &self.include_dir
    }

    pub fn lib_dir(&self) -> &Path {
        &self.lib_dir
    }

    /// The link and include lines of `mlua-sys`'s build script (`DEP_LUA_INCLUDE` for
    /// `model/build.rs`, which compiles Redis's Lua libraries against these headers).
    pub fn print_cargo_metadata(&self) {
        println!("cargo:rustc-link-search=native={}", self.lib_dir.display());
        println!("cargo:rustc-link-lib=static={}", self.lib_name);
        println!("cargo:include={}", self.include_dir.display());
        println!("cargo:lib={}", self.lib_dir.display());
    }
}
