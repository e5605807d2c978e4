//! Redis 6.2's relative TTLs on the replication stream (`topology.ttl_propagation:
//! "relative"`). Redis 6.2 propagates `SET ... EX/PX` as `SET key value PX <ms>`
//! (redis/redis@6.2.14 `src/t_string.c:121-132`) and `EXPIRE`/`PEXPIRE` as written, so every
//! replica counts the lease from its own clock when it applies the command; Redis 7.0 sends
//! absolute `PXAT`/`PEXPIREAT` (redis/redis PR 8474, issue 8433), which a replica whose clock
//! runs ahead sees expire early. The model propagates as 7.0 does; this turns each absolute
//! TTL back into the time left on the master's clock when it ran the command. Every lock scheme
//! sets relative TTLs, so the 6.2 stream is exact for them; an `EXPIREAT` a client wrote would
//! also go out relative here (not used by any scheme). The AOF is unchanged: 6.2 also writes it
//! with absolute `PEXPIREAT` (`src/aof.c:577-629`).

/// The stream commands with absolute TTLs rewritten as relative ones, `now_ms` being the
/// master's wall clock when it executed them.
pub fn relative(commands: Vec<Vec<Vec<u8>>>, now_ms: i64) -> Vec<Vec<Vec<u8>>> {
    commands
        .into_iter()
        .map(|mut argv| {
            let left = |at: &[u8]| -> Option<Vec<u8>> {
                let at: i64 = std::str::from_utf8(at).ok()?.parse().ok()?;
                Some((at - now_ms).max(1).to_string().into_bytes())
            };
            let word = argv.first().map(|w| w.to_ascii_uppercase());
            match word.as_deref() {
                Some(b"SET") => {
                    let at = argv.iter().position(|a| a.eq_ignore_ascii_case(b"PXAT"));
                    if let Some(i) = at
                        && let Some(ms) = argv.get(i + 1).and_then(|a| left(a))
                    {
                        argv[i] = b"PX".to_vec();
                        argv[i + 1] = ms;
                    }
                }
                Some(b"PEXPIREAT") => {
                    if let Some(ms) = argv.get(2).and_then(|a| left(a)) {
                        argv[0] = b"PEXPIRE".to_vec();
                        argv[2] = ms;
                    }
                }
                _ => {}
            }
            argv
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmds: &[&str]) -> Vec<Vec<Vec<u8>>> {
        cmds.iter()
            .map(|c| c.split(' ').map(|w| w.as_bytes().to_vec()).collect())
            .collect()
    }

    #[test]
    fn absolute_ttls_become_the_time_left() {
        let out = relative(
            words(&[
                "SET lock t PXAT 1010000",
                "PEXPIREAT lock 1030000",
                "DEL lock",
                "MULTI",
            ]),
            1_000_000,
        );
        assert_eq!(
            out,
            words(&[
                "SET lock t PX 10000",
                "PEXPIRE lock 30000",
                "DEL lock",
                "MULTI"
            ])
        );
    }
}
