//! Compiles the C libraries Redis 7.0.15 bundles with its Lua (`deps/lua/src` of Redis, copied
//! into `vendor/redis/` with Redis's later `bit.tohex` fix): `cjson`, `cmsgpack`, `struct` and
//! `bit`, so scripts see the same libraries as in `redis-server`. They are built against the
//! headers of the Lua that mlua builds from `vendor/lua` (`DEP_LUA_INCLUDE`, from `mlua-sys`'s
//! `links = "lua"`), with the
//! flags Redis's `deps/Makefile` gives Lua (`-DLUA_ANSI -DENABLE_CJSON_GLOBAL`). Also compiles
//! `src/redis/long_double.c`: INCRBYFLOAT's `long double` arithmetic, which Rust cannot express.

fn main() {
    let src = "vendor/redis/deps/lua/src";
    let include = std::env::var("DEP_LUA_INCLUDE")
        .expect("mlua-sys (vendored) exports its Lua headers as DEP_LUA_INCLUDE");
    cc::Build::new()
        .include(include)
        .include(src)
        .define("LUA_ANSI", None)
        .define("ENABLE_CJSON_GLOBAL", None)
        .files(
            [
                "lua_cjson.c",
                "strbuf.c",
                "fpconv.c",
                "lua_cmsgpack.c",
                "lua_struct.c",
                "lua_bit.c",
            ]
            .map(|file| format!("{src}/{file}")),
        )
        .warnings(false)
        .compile("redis_lua_libs");
    println!("cargo:rerun-if-changed=vendor/redis");
    // INCRBYFLOAT's `long double` arithmetic (`src/redis/long_double.c`), not part of Lua.
    cc::Build::new()
        .file("src/redis/long_double.c")
        .compile("locksim_long_double");
    println!("cargo:rerun-if-changed=src/redis/long_double.c");
}
