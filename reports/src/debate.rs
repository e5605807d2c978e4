//! "The debate, replayed": the claims of Kleppmann's "How to do distributed locking" (2016),
//! antirez's answer "Is Redlock safe?" (2016), redis.io's Redlock page and the five Chinese
//! articles the project started from (`shared/seeds/`, "article 000" to "article 004": the
//! word "seed" is kept for simulation seeds), each next to the matrix (or catalog) cells that
//! test it, with the count of seeds that showed what the claim predicts.
//!
//! Claims from the two blog posts and redis.io are paraphrased (the report does not quote what
//! this repository cannot check); quotes are verbatim from the articles.

use std::fmt::Write;

use crate::summary::{Cell, Summary};

/// What a claim says a cell will show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predicts {
    /// Two holders at once, or a lost update, on some seed.
    Unsafe,
    /// A lost update on some seed.
    Corrupts,
    /// No lost update on any seed (two holders may still overlap).
    ResourceSafe,
    /// Neither two holders nor a lost update on any seed.
    Safe,
    /// Stuck on some seed.
    Stuck,
    /// Never stuck.
    Live,
}

impl Predicts {
    pub fn words(self) -> &'static str {
        match self {
            Predicts::Unsafe => "two holders",
            Predicts::Corrupts => "lost update",
            Predicts::ResourceSafe => "resource safe",
            Predicts::Safe => "safe",
            Predicts::Stuck => "stuck",
            Predicts::Live => "live",
        }
    }

    /// Whether the cell's runs show what was predicted.
    pub fn holds_for(self, cell: &Cell) -> bool {
        let v = &cell.stats.verdicts;
        let overlap = v.mutual_exclusion.violated > 0;
        let lost = v.resource_safety.violated > 0;
        match self {
            Predicts::Unsafe => overlap || lost,
            Predicts::Corrupts => lost,
            Predicts::ResourceSafe => !lost,
            Predicts::Safe => !overlap && !lost,
            Predicts::Stuck => v.liveness.stuck > 0,
            Predicts::Live => v.liveness.stuck == 0,
        }
    }

    /// The count the prediction is about: (seeds that showed it, in words), out of the seeds
    /// run — never the count of something else that broke.
    pub fn count(self, cell: &Cell) -> (u64, &'static str) {
        let v = &cell.stats.verdicts;
        match self {
            Predicts::Unsafe | Predicts::Safe => (v.unsafe_runs, "two holders or a lost update"),
            Predicts::Corrupts | Predicts::ResourceSafe => {
                (v.resource_safety.violated, "a lost update")
            }
            Predicts::Stuck | Predicts::Live => (v.liveness.stuck, "stuck"),
        }
    }
}

/// One cell a claim is tested on.
pub struct Test {
    pub scenario: &'static str,
    pub scheme: &'static str,
    pub predicts: Predicts,
}

pub struct Claim {
    /// Who says it, and where.
    pub who: &'static str,
    /// The claim, in this report's words.
    pub claim: &'static str,
    /// Verbatim, from one of the articles, when one says it.
    pub quote: Option<&'static str>,
    pub tests: &'static [Test],
}

const fn t(scenario: &'static str, scheme: &'static str, predicts: Predicts) -> Test {
    Test {
        scenario,
        scheme,
        predicts,
    }
}

const KLEPPMANN: &str = "Kleppmann 2016, “How to do distributed locking”";
const ANTIREZ: &str = "antirez 2016, “Is Redlock safe?”";
const REDIS_IO: &str = "redis.io, “Distributed Locks with Redis”";

/// The claims, in the order the debate ran.
pub const CLAIMS: &[Claim] = &[
    Claim {
        who: KLEPPMANN,
        claim: "A stop-the-world pause longer than the lease lets a second client take the lock; the first wakes up and writes anyway — whatever the lock service, Redlock included.",
        quote: None,
        tests: &[
            t("matrix-gc-pause", "set-nx-px-lua", Predicts::Corrupts),
            t("matrix-gc-pause", "redlock", Predicts::Corrupts),
        ],
    },
    Claim {
        who: KLEPPMANN,
        claim: "A network delay does the same: the write reaches the storage after the lease ran out.",
        quote: None,
        tests: &[
            t("matrix-network-delay", "set-nx-px-lua", Predicts::Corrupts),
            t("matrix-network-delay", "redlock", Predicts::Corrupts),
        ],
    },
    Claim {
        who: KLEPPMANN,
        claim: "Fencing tokens make the resource safe: the storage refuses a write with an older token than one it has seen.",
        quote: None,
        tests: &[
            t("matrix-gc-pause", "fencing", Predicts::ResourceSafe),
            t("matrix-network-delay", "fencing", Predicts::ResourceSafe),
        ],
    },
    Claim {
        who: KLEPPMANN,
        claim: "The token must come from a counter that never goes back (a consensus system's, such as ZooKeeper's zxid); a Redis counter, asynchronously replicated, is not one: after a failover it repeats.",
        quote: None,
        tests: &[t(
            "matrix-failover-lagging-replica",
            "fencing",
            Predicts::Corrupts,
        )],
    },
    Claim {
        who: KLEPPMANN,
        claim: "Redlock depends on clocks: if the wall clock of a master in the holder's bare majority jumps forward, the key expires there and another client gets a majority too.",
        quote: None,
        tests: &[
            t("matrix-server-clock-jump", "redlock", Predicts::Unsafe),
            t("redlock-clock-jump", "redlock", Predicts::Unsafe),
        ],
    },
    Claim {
        who: KLEPPMANN,
        claim: "The same if that master crashes before persisting the key and restarts at once.",
        quote: None,
        tests: &[
            t(
                "matrix-master-crash-bare-majority",
                "redlock",
                Predicts::Unsafe,
            ),
            t(
                "matrix-bare-majority-power-loss-everysec",
                "redlock",
                Predicts::Unsafe,
            ),
            t("redlock-crash-restart", "redlock", Predicts::Unsafe),
        ],
    },
    Claim {
        who: KLEPPMANN,
        claim: "A pause while the lock replies are in flight: the keys expire, another client locks, and the first reads its replies and believes it holds the lock.",
        quote: None,
        tests: &[
            t(
                "matrix-pause-replies-in-flight",
                "redlock",
                Predicts::Unsafe,
            ),
            t(
                "matrix-pause-replies-in-flight",
                "redlock-no-validity",
                Predicts::Unsafe,
            ),
        ],
    },
    Claim {
        who: ANTIREZ,
        claim: "Redlock subtracts the time spent acquiring from the lease (its validity check): a client paused or delayed while acquiring finds no validity left and does not use the lock.",
        quote: None,
        tests: &[
            t("matrix-pause-replies-in-flight", "redlock", Predicts::Safe),
            t(
                "matrix-pause-replies-in-flight",
                "redlock:antirez/redlock-rb",
                Predicts::Safe,
            ),
            t(
                "matrix-pause-replies-in-flight",
                "redlock:redsync",
                Predicts::Safe,
            ),
        ],
    },
    Claim {
        who: ANTIREZ,
        claim: "A pause after the lock is acquired (after the validity check) breaks every lock with auto-release, not Redlock alone; it is a problem of the application, not of the algorithm.",
        quote: None,
        tests: &[
            t("matrix-gc-pause", "redlock", Predicts::Unsafe),
            t("matrix-gc-pause", "watchdog", Predicts::Unsafe),
            t("matrix-gc-pause", "redisson", Predicts::Unsafe),
            t("redlock-pause-after-validity", "redlock", Predicts::Unsafe),
        ],
    },
    Claim {
        who: ANTIREZ,
        claim: "Without persistence, keep a crashed master down for longer than the longest lease (delayed restart) and the restart is safe.",
        quote: None,
        tests: &[t(
            "matrix-master-crash-delayed-restart",
            "redlock",
            Predicts::Safe,
        )],
    },
    Claim {
        who: REDIS_IO,
        claim: "…or persist every write before replying (appendfsync always), at a cost in speed.",
        quote: None,
        tests: &[t(
            "matrix-master-crash-aof-always",
            "redlock",
            Predicts::Safe,
        )],
    },
    Claim {
        who: REDIS_IO,
        claim: "Redlock keeps working while a majority of its independent masters is up: losing one master (a crash without persistence, a failover) does not give the lock away.",
        quote: None,
        tests: &[
            t("matrix-master-crash-restart", "redlock", Predicts::Safe),
            t("matrix-failover-lagging-replica", "redlock", Predicts::Safe),
        ],
    },
    Claim {
        who: "redis.io; articles 001, 004",
        claim: "A master with a replica is not a fix: replication is asynchronous, the master can crash before the key reaches the replica, and after the failover another client takes the lock.",
        quote: Some("线程B也得到了和A还持有的相同的锁 (article 004)"),
        tests: &[
            t(
                "matrix-failover-lagging-replica",
                "set-nx-px-lua",
                Predicts::Unsafe,
            ),
            t(
                "matrix-failover-lagging-replica",
                "watchdog",
                Predicts::Unsafe,
            ),
            t(
                "sentinel-failover-lagging-replica",
                "set-nx-px-lua",
                Predicts::Unsafe,
            ),
        ],
    },
    Claim {
        who: "article 004",
        claim: "Of Kleppmann's three failures, the clock jump is the one Redlock cannot survive; it was built to withstand the long pause and the long delay.",
        quote: Some("antirez肯定意识到了这三种情况对Redlock最致命的其实是第一点：时钟发生跳跃"),
        tests: &[
            t("matrix-server-clock-jump", "redlock", Predicts::Unsafe),
            t("matrix-pause-replies-in-flight", "redlock", Predicts::Safe),
            t("matrix-gc-pause", "redlock", Predicts::Safe),
        ],
    },
    Claim {
        who: "articles 000, 004",
        claim: "SETNX + DEL without a TTL: a holder that dies never releases the lock.",
        quote: Some("那么这个锁就永远释放不掉了 (article 004)"),
        tests: &[
            t("matrix-holder-crash", "setnx-del", Predicts::Stuck),
            t("matrix-holder-crash", "set-nx-px-lua", Predicts::Live),
        ],
    },
    Claim {
        who: "articles 001, 002, 004",
        claim: "SETNX then EXPIRE is two commands: a crash in between leaves a key that never expires; SET NX PX does both at once.",
        quote: Some("若在这里程序突然崩溃，则无法设置过期时间，将发生死锁 (article 001)"),
        tests: &[
            t("matrix-crash-mid-acquire", "setnx-expire", Predicts::Stuck),
            t("matrix-crash-mid-acquire", "set-nx-px-lua", Predicts::Live),
        ],
    },
    Claim {
        who: "article 004",
        claim: "Work that outlasts the TTL: the lock expires, another thread takes it, and a plain DEL then deletes that thread's lock.",
        quote: Some("有可能删除掉的是其它线程已经获取到的锁 (article 004)"),
        tests: &[t(
            "matrix-slow-critical-section",
            "set-nx-px-del",
            Predicts::Corrupts,
        )],
    },
    Claim {
        who: "articles 000, 003",
        claim: "A watchdog that renews the lease while the holder still runs keeps a long critical section safe — but it stops with its process, so a GC pause still breaks it.",
        quote: Some("如果线程还持有锁,则刷新锁过期时间 (article 000)"),
        tests: &[
            t("matrix-slow-critical-section", "watchdog", Predicts::Safe),
            t("matrix-slow-critical-section", "redisson", Predicts::Safe),
            t("matrix-gc-pause", "watchdog", Predicts::Unsafe),
        ],
    },
    Claim {
        who: "article 001",
        claim: "A lock value that is the client's own expiry time needs every client's clock in sync.",
        quote: Some("需要强制要求分布式下每个客户端的时间必须同步 (article 001)"),
        tests: &[t(
            "matrix-client-clock-jump",
            "setnx-getset",
            Predicts::Unsafe,
        )],
    },
];

/// What a test found: the cell (if it ran) and whether it agrees.
pub fn judge<'a>(s: &'a Summary, test: &Test) -> Option<(&'a Cell, bool)> {
    let cell = s.cell(test.scenario, test.scheme)?;
    (cell.stats.seeds_run > 0).then(|| (cell, test.predicts.holds_for(cell)))
}

/// How a report names a scenario: a matrix column's short header, else its name.
pub fn scenario_label<'a>(s: &'a Summary, scenario: &'a str) -> &'a str {
    s.scenarios
        .iter()
        .find(|sc| sc.name == scenario)
        .and_then(|sc| sc.matrix.as_ref())
        .map_or(scenario, |m| m.column.as_str())
}

/// What the runs showed, as the prediction counts it: `0/10 seeds: a lost update`.
pub fn observed(test: &Test, cell: &Cell) -> String {
    let (k, words) = test.predicts.count(cell);
    format!("{k}/{} seeds: {words}", cell.stats.seeds_run)
}

/// Every count of the cell, for a tooltip.
pub fn all_counts(cell: &Cell) -> String {
    let st = &cell.stats;
    format!(
        "{} of {} seeds broke something: {} with two holders, {} with a lost update, {} stuck",
        st.seeds_violating,
        st.seeds_run,
        st.verdicts.mutual_exclusion.violated,
        st.verdicts.resource_safety.violated,
        st.verdicts.liveness.stuck
    )
}

/// The claims in Markdown, one list item each with its tests.
pub fn markdown(s: &Summary, out: &mut String) {
    for claim in CLAIMS {
        let tests: Vec<String> = claim
            .tests
            .iter()
            .filter_map(|test| {
                let (cell, ok) = judge(s, test)?;
                Some(format!(
                    "{} × {} (predicts {}): {} — {}",
                    test.scheme,
                    scenario_label(s, test.scenario),
                    test.predicts.words(),
                    if ok { "✓ as claimed" } else { "✗ not so" },
                    observed(test, cell)
                ))
            })
            .collect();
        if tests.is_empty() {
            continue;
        }
        let quote = claim.quote.map_or(String::new(), |q| format!(" «{q}»"));
        let _ = writeln!(out, "- **{}**: {}{quote}", claim.who, claim.claim);
        for test in tests {
            let _ = writeln!(out, "  - {test}");
        }
    }
    out.push('\n');
}
