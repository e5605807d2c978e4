/* locksim, not Redis: the read-only tables scripts see (`string`, `math`, `redis`, `_G`, ...)
 * are empty proxies in front of the real tables (model/src/redis/lua.rs), where Redis 7.0 makes
 * the tables themselves read-only (`lua_enablereadonlytable`). The encoders look through a
 * proxy to its table, as they read Redis's: `cjson.encode(string)` fails on the functions
 * inside it, `cmsgpack.pack(string)` packs them as nil. The registry field holds the map of
 * proxies to tables. */
#ifndef LOCKSIM_READONLY_H
#define LOCKSIM_READONLY_H

#include "lua.h"

#define LOCKSIM_READONLY_FIELD "locksim.readonly"

/* Replaces the table on the top of the stack by the table behind it if it is a proxy. */
static void locksim_look_through_readonly(lua_State *l) {
    if (!lua_checkstack(l, 2))
        return;
    lua_getfield(l, LUA_REGISTRYINDEX, LOCKSIM_READONLY_FIELD);
    if (lua_istable(l, -1)) {
        lua_pushvalue(l, -2);
        lua_rawget(l, -2);
        if (lua_istable(l, -1)) {
            lua_replace(l, -3);
            lua_pop(l, 1);
            return;
        }
        lua_pop(l, 1);
    }
    lua_pop(l, 1);
}

#endif
