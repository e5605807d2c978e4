//! Mark-anchored fault insertion: put the next faults where the first rare state is.
//!
//! A bug that needs two rare events in order (a WAIT acknowledged by one replica, then a
//! failover) is a coincidence a fresh draw meets by luck and a mutant no likelier: nothing
//! grows gradually towards it. moonpool-explorer branches a run where a rare mark first fires
//! and finds a double grant needing two 1/1000 events in ~2,000 runs instead of ~10⁶. Here,
//! when a run first reaches a feature (a mark, a pair of marks, a mark under a fault kind) at
//! simulated time t, that point becomes an [`Anchor`]: its children replay the run's faults up
//! to t exactly (`faults_in_sequence`) and insert 1 to [`MAX_STACK`] faults of kinds the
//! nemesis allows right after it (stacked, each with its own kind, role and offset: after a
//! partially acknowledged WAIT, a failover exposes the gap only if the replica that
//! acknowledged is not the one promoted, and Sentinel promotes the best offset: redis 7.0.15
//! src/sentinel.c sentinelSelectSlave, compareSlavesForPromotion), each `offset` after t,
//! drawn up to one of
//! the scenario's own time scales ([`TimeScales`]: link latency, the command timeout, the
//! holds, the lease, Sentinel's down-after), and lasting a time of the kind's own range, drawn
//! around a time scale where that meets the range. A kind's fault comes at the first time
//! at or after that which waits of its `every_ms` reach from the last one of the kind (the
//! children stay within the nemesis: `bounds::next_reachable`). Its target is named by its role at t where it has one: a client that holds the
//! lock then (`holder`) or one that does not (`peer`); a Redis server a master, a replica
//! synced with its master or one lagging behind it (`server_roles_at`: after a WAIT
//! acknowledged by one replica, "the one that did not" whichever it was); another server by
//! its name.
//!
//! Which children come first is learnt during the campaign ([`Prior`]): each child counts as a
//! success for its arms — how many faults it stacked, (anchor mark, kind), (kind, offset
//! scale), (kind, duration scale), (kind, target role) — when its run reached a feature no run
//! had, or broke a verdict; anchors, kinds and scales are drawn with weight (successes + 1) /
//! (tries + 2), so untried arms are tried and arms that paid are tried more. Before anything
//! is learnt: rare anchor marks first, anchors where kinds the run did not exercise can still
//! fire first ([`STALE_ANCHOR_WEIGHT`]), such kinds first ([`EXERCISED_KIND_WEIGHT`]), the
//! holder first ([`HOLDER_WEIGHT`]), a range's upper bound first ([`UPPER_BOUND_WEIGHT`]).
//! Directed (`directed`): children of the anchors furthest along the path, credited when
//! their run went further.

use std::collections::{BTreeMap, BTreeSet};

use model::history::{Event, EventKind};
use model::marks::Mark;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::faults::nemesis::as_scripted;
use crate::hunt::bounds;
use crate::hunt::mutate::lasts_mut;
use crate::hunt::swarm::{self, KindDraw};
use crate::scenario::Scenario;
use crate::scenario::faults::{Fault, FaultKind};
use crate::scenario::nemesis::{KindSpec, NemesisSpec};
use crate::scenario::range::MsRange;

/// Children an anchor gives before it is dropped.
pub const CHILDREN_PER_ANCHOR: u32 = 6;

/// Most faults one anchored child inserts (a bug of two rare events may need a fault on each
/// of several roles, e.g. the replica that acknowledged a WAIT kept from a promotion that
/// Sentinel would give it for its better offset).
pub const MAX_STACK: usize = 3;

/// Anchors kept waiting; past it the oldest go.
pub const MAX_ANCHORS: usize = 64;

/// A duration drawn from the kind's own range (as the nemesis draws it), not a time scale.
pub const KIND_RANGE: &str = "kind_range";

/// A duration or parameter at its range's upper bound (AFL's "interesting values": a fault's
/// bound is where bugs are; the longest pause outlasts the most lease).
pub const RANGE_MAX: &str = "range_max";

/// A duration or parameter at its range's lower bound.
pub const RANGE_MIN: &str = "range_min";

/// A parameter as the nemesis draws it (uniform over its range).
pub const DRAWN: &str = "drawn";

/// Weight of an anchor near which no kind the run did not already exercise can fire (the
/// nemesis's spacing or the heal rules them out), against its number of such kinds otherwise:
/// its children could only repeat what the run did.
pub const STALE_ANCHOR_WEIGHT: f64 = 0.1;

/// Prior weight of a range's upper bound against 1 for every other choice of a duration or a
/// parameter, before the campaign learnt which pays: the bound most likely to outlast a lease
/// or a timeout is drawn twice as often.
pub const UPPER_BOUND_WEIGHT: f64 = 2.0;

/// Prior weight of a client that holds the lock at the anchor, against 1 for every other
/// role: a lock bug needs its holder stopped or slowed far more often than a waiting peer.
pub const HOLDER_WEIGHT: f64 = 2.0;

/// Weight of a kind the run already exercised near the anchor (or the child already
/// inserted), against 1 for the others: the next step of a path is usually another fault.
pub const EXERCISED_KIND_WEIGHT: f64 = 0.25;

/// The prior weight of a duration's or a parameter's choice ([`UPPER_BOUND_WEIGHT`]).
fn bound_weight(choice: &str) -> f64 {
    if choice == RANGE_MAX {
        UPPER_BOUND_WEIGHT
    } else {
        1.0
    }
}

/// The scenario's time scales, ms, by name: where a second fault matters.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeScales(pub Vec<(&'static str, u64)>);

impl TimeScales {
    /// Link latency (its maximum), the client's command timeout, the longest hold, the lease
    /// (`lease_ms`, when the scheme has one) and Sentinel's down-after (with Sentinels).
    pub fn of(row: &Scenario, lease_ms: Option<u64>) -> TimeScales {
        let mut scales = vec![
            ("latency", row.network.latency_ms.max.max(1)),
            ("command_timeout", row.clients.command_timeout_ms),
            ("hold", row.clients.hold_ms.max.max(1)),
        ];
        if let Some(lease_ms) = lease_ms {
            scales.push(("lease", lease_ms));
        }
        if row.topology.sentinels > 0 {
            scales.push(("down_after", row.topology.sentinel_down_after_ms));
        }
        TimeScales(scales)
    }
}

/// A point to insert a fault after: a kept run's faults, its seed, the mark that reached a new
/// feature and when.
#[derive(Clone, Debug)]
pub struct Anchor {
    pub faults: Vec<Fault>,
    pub seed: u64,
    pub mark: Mark,
    pub t_us: u64,
    /// The clients that held the lock at `t_us` (their role: `holder`).
    pub holders: BTreeSet<String>,
    /// The Redis servers' roles at `t_us` (`server_roles_at`).
    pub server_roles: BTreeMap<String, &'static str>,
    /// How far along `--toward`'s path the run had gone at `t_us` (0: a blind anchor).
    pub progress: usize,
    /// Children given so far.
    children: u32,
}

/// One learnt arm: what a child chose.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arm {
    /// The anchor's mark and the inserted kind.
    MarkKind(Mark, &'static str),
    /// The inserted kind and the time scale of its offset after the anchor.
    Offset(&'static str, &'static str),
    /// The inserted kind and the time scale of its duration ([`KIND_RANGE`]: the kind's own).
    Duration(&'static str, &'static str),
    /// The inserted kind and its target's role at the anchor (`holder`, `peer`, or a server's
    /// name).
    Target(&'static str, String),
    /// How many faults the child inserted.
    Stack(usize),
    /// The inserted kind and its parameter (`delta_ms`, `rate`, `extra_ms`): as drawn, or a
    /// bound of its range.
    Parameter(&'static str, &'static str),
}

/// What a child chose: its arms, credited when its run has been learnt from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub arms: Vec<Arm>,
    /// Its anchor's progress along `--toward`'s path: the child succeeds when its run went
    /// further.
    pub anchor_progress: usize,
}

/// Successes and tries per arm.
#[derive(Clone, Debug, Default)]
pub struct Prior {
    arms: BTreeMap<Arm, (u64, u64)>,
}

impl Prior {
    /// (successes + 1) / (tries + 2): ½ for an untried arm.
    pub fn weight(&self, arm: &Arm) -> f64 {
        let (wins, tries) = self.arms.get(arm).copied().unwrap_or((0, 0));
        (wins as f64 + 1.0) / (tries as f64 + 2.0)
    }

    /// The weight of a mark over every kind: its anchors' successes over their tries.
    fn mark_weight(&self, mark: Mark) -> f64 {
        let (wins, tries) = self
            .arms
            .iter()
            .filter(|(arm, _)| matches!(arm, Arm::MarkKind(m, _) if *m == mark))
            .fold((0, 0), |(w, t), (_, (aw, at))| (w + aw, t + at));
        (wins as f64 + 1.0) / (tries as f64 + 2.0)
    }

    pub fn credit(&mut self, choice: &Choice, success: bool) {
        for arm in &choice.arms {
            let (wins, tries) = self.arms.entry(arm.clone()).or_default();
            *wins += u64::from(success);
            *tries += 1;
        }
    }
}

/// What an anchor's children may insert: per kind the time of its last fault up to the anchor
/// (0: none), the kinds the run exercised near it, and how far after it an insertion goes.
struct Reach<'a> {
    /// The nemesis draws a kind's next fault a sum of `every_ms` waits after its last
    /// (`bounds::next_reachable`).
    last_of_kind: BTreeMap<&'a str, u64>,
    /// Kinds open at the anchor or fired within `features::PAIR_WINDOW_MS` before it: the
    /// next step of a path is usually another kind.
    exercised: BTreeSet<&'static str>,
    /// The anchor plus the scenario's largest time scale.
    near_ms: u64,
}

impl<'a> Reach<'a> {
    /// For the faults of a run (those after `t_ms` ignored) anchored at `t_ms`.
    fn of(faults: &[Fault], t_ms: u64, nemesis: &'a NemesisSpec, scales: &TimeScales) -> Self {
        let prefix = || faults.iter().filter(|f| swarm::at_ms(f) <= t_ms);
        let mut last_of_kind: BTreeMap<&str, u64> =
            nemesis.kinds.iter().map(|k| (k.kind.as_str(), 0)).collect();
        for f in prefix() {
            if let Some(k) = nemesis.kinds.iter().find(|k| k.kind == f.kind.name()) {
                last_of_kind.insert(k.kind.as_str(), swarm::at_ms(f));
            }
        }
        let exercised = prefix()
            .filter(|f| {
                let at = swarm::at_ms(f);
                at + bounds::lasts_ms(f) >= t_ms
                    || at + crate::hunt::features::PAIR_WINDOW_MS >= t_ms
            })
            .map(|f| kind_name(f.kind.name()))
            .collect();
        Reach {
            last_of_kind,
            exercised,
            near_ms: t_ms + scales.0.iter().map(|(_, ms)| *ms).max().unwrap_or(1),
        }
    }

    /// The earliest time from `at_ms` on that the nemesis could draw a fault of kind `k`.
    fn earliest(&self, k: &KindSpec, at_ms: u64) -> u64 {
        bounds::next_reachable(self.last_of_kind[k.kind.as_str()], at_ms, k.every_ms)
    }

    /// Whether a child of the anchor at `t_ms` could insert a fault of kind `k` near it, before
    /// the heal.
    fn can_fire(&self, k: &KindSpec, t_ms: u64, heal_at_ms: u64) -> bool {
        self.earliest(k, t_ms) <= self.near_ms.min(heal_at_ms.saturating_sub(1))
    }
}

/// How many kinds of the nemesis an anchor's children could insert near it (`Reach`) that
/// its run did not exercise near it.
fn fresh_kinds(
    anchor: &Anchor,
    nemesis: &NemesisSpec,
    scales: &TimeScales,
    heal_at_ms: u64,
) -> usize {
    let t_ms = anchor.t_us / 1000;
    let reach = Reach::of(&anchor.faults, t_ms, nemesis, scales);
    nemesis
        .kinds
        .iter()
        .filter(|k| {
            !reach.exercised.contains(kind_name(&k.kind)) && reach.can_fire(k, t_ms, heal_at_ms)
        })
        .count()
}

/// Draws index `i` of `weights` with probability proportional to its weight.
pub(crate) fn roulette(weights: &[f64], rng: &mut ChaCha8Rng) -> usize {
    let total: f64 = weights.iter().sum();
    let mut left = rng.r#gen::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if left < *w {
            return i;
        }
        left -= w;
    }
    weights.len() - 1
}

/// The anchors waiting for children, and what their children taught.
#[derive(Default)]
pub struct Anchors {
    waiting: Vec<Anchor>,
    /// Every point anchored so far (seed, mark, time): a child replays its anchor's run up to
    /// the anchor, so it reaches the same mark at the same time again; anchoring there twice
    /// would spend the campaign on one point.
    anchored: BTreeSet<(u64, Mark, u64)>,
    pub prior: Prior,
}

impl Anchors {
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Anchors a run: one per mark that reached a new (or rare) feature, at the first time it
    /// did; none at or past the heal (a fault inserted there would not fire). `events` is the
    /// run's trace (who held the lock when).
    pub fn add(
        &mut self,
        faults: &[Fault],
        seed: u64,
        reached_at: &[(Mark, u64)],
        events: &[Event],
        heal_at_ms: u64,
    ) {
        let mut first: BTreeMap<Mark, u64> = BTreeMap::new();
        for &(mark, t_us) in reached_at {
            let t = first.entry(mark).or_insert(t_us);
            *t = (*t).min(t_us);
        }
        for (mark, t_us) in first {
            self.push(faults, seed, mark, t_us, 0, events, heal_at_ms);
        }
    }

    /// Anchors a run at the last mark of `--toward`'s path it reached (`directed`), `progress`
    /// marks along it.
    #[allow(clippy::too_many_arguments)]
    pub fn add_on_path(
        &mut self,
        faults: &[Fault],
        seed: u64,
        (mark, t_us): (Mark, u64),
        progress: usize,
        events: &[Event],
        heal_at_ms: u64,
    ) {
        self.push(faults, seed, mark, t_us, progress, events, heal_at_ms);
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        faults: &[Fault],
        seed: u64,
        mark: Mark,
        t_us: u64,
        progress: usize,
        events: &[Event],
        heal_at_ms: u64,
    ) {
        if t_us / 1000 + 1 >= heal_at_ms || !self.anchored.insert((seed, mark, t_us)) {
            return;
        }
        self.waiting.push(Anchor {
            faults: faults.to_vec(),
            seed,
            mark,
            t_us,
            holders: holders_at(events, t_us),
            server_roles: server_roles_at(events, t_us),
            progress,
            children: 0,
        });
        let over = self.waiting.len().saturating_sub(MAX_ANCHORS);
        self.waiting.drain(..over);
    }

    /// The furthest progress along `--toward`'s path of a waiting anchor (0: none on it).
    pub fn furthest(&self) -> usize {
        self.waiting.iter().map(|a| a.progress).max().unwrap_or(0)
    }

    /// The anchor to give a child: with `furthest` (directed), one of the furthest progress
    /// along the path; otherwise any, drawn by its mark's learnt weight over the runs that
    /// reached that mark (`mark_hits`: rare states first).
    fn pick(
        &self,
        furthest: bool,
        mark_hits: &dyn Fn(Mark) -> u64,
        fresh_kinds: &dyn Fn(&Anchor) -> usize,
        rng: &mut ChaCha8Rng,
    ) -> usize {
        let best = self.furthest();
        let weights: Vec<f64> = self
            .waiting
            .iter()
            .map(|a| {
                if furthest && a.progress < best {
                    return 0.0;
                }
                let fresh = match fresh_kinds(a) {
                    0 => STALE_ANCHOR_WEIGHT,
                    n => n as f64,
                };
                fresh * self.prior.mark_weight(a.mark) / mark_hits(a.mark).max(1) as f64
            })
            .collect();
        roulette(&weights, rng)
    }

    /// A child of an anchor (see [`Anchors::pick`]): the anchor's faults up to its time, and
    /// 1 to [`MAX_STACK`] faults after it (see the module doc); the seed it runs on and what
    /// it chose. `None` when no kind of the nemesis may fire near the anchor.
    #[allow(clippy::too_many_arguments)]
    pub fn child(
        &mut self,
        nemesis: &NemesisSpec,
        scales: &TimeScales,
        heal_at_ms: u64,
        furthest: bool,
        mark_hits: &dyn Fn(Mark) -> u64,
        rng: &mut ChaCha8Rng,
    ) -> Option<(Vec<Fault>, u64, Choice)> {
        if self.waiting.is_empty() || nemesis.kinds.is_empty() || scales.0.is_empty() {
            return None;
        }
        let fresh_kinds = |a: &Anchor| fresh_kinds(a, nemesis, scales, heal_at_ms);
        let i = self.pick(furthest, mark_hits, &fresh_kinds, rng);
        let anchor = &mut self.waiting[i];
        anchor.children += 1;
        let anchor = if anchor.children >= CHILDREN_PER_ANCHOR {
            self.waiting.remove(i)
        } else {
            anchor.clone()
        };
        let t_ms = anchor.t_us / 1000;
        let mut faults: Vec<Fault> = anchor
            .faults
            .iter()
            .filter(|f| swarm::at_ms(f) <= t_ms)
            .cloned()
            .collect();
        faults.truncate(swarm::MAX_FAULTS - MAX_STACK);
        let mut reach = Reach::of(&faults, t_ms, nemesis, scales);
        let stack_weights: Vec<f64> = (1..=MAX_STACK)
            .map(|n| self.prior.weight(&Arm::Stack(n)))
            .collect();
        let stack = 1 + roulette(&stack_weights, rng);
        let mut arms = vec![Arm::Stack(stack)];
        for _ in 0..stack {
            let near: Vec<&KindSpec> = nemesis
                .kinds
                .iter()
                .filter(|k| reach.can_fire(k, t_ms, heal_at_ms))
                .collect();
            if near.is_empty() {
                break;
            }
            let kind_weights: Vec<f64> = near
                .iter()
                .map(|k| {
                    let name = kind_name(&k.kind);
                    let fresh = if reach.exercised.contains(name) {
                        EXERCISED_KIND_WEIGHT
                    } else {
                        1.0
                    };
                    fresh * self.prior.weight(&Arm::MarkKind(anchor.mark, name))
                })
                .collect();
            let kind = near[roulette(&kind_weights, rng)];
            let name = kind_name(&kind.kind);
            reach.exercised.insert(name);
            let offset_weights: Vec<f64> = scales
                .0
                .iter()
                .map(|(scale, _)| self.prior.weight(&Arm::Offset(name, scale)))
                .collect();
            let (offset_scale, offset_of) = scales.0[roulette(&offset_weights, rng)];
            let offset_ms = swarm::log_uniform(
                rng,
                MsRange {
                    min: 1,
                    max: offset_of.max(1),
                },
            );
            let at_ms = reach.earliest(kind, t_ms + offset_ms).min(heal_at_ms - 1);
            reach.last_of_kind.insert(kind.kind.as_str(), at_ms);
            // Durations around a time scale, where that meets the kind's range, the range, or
            // one of its bounds.
            let mut durations: Vec<(&'static str, MsRange)> = Vec::new();
            if let Some(range) = kind.duration_ms {
                for &(scale, ms) in &scales.0 {
                    let around = swarm::around(ms.max(1), range);
                    if around.min <= around.max
                        && ms.saturating_mul(2) >= range.min
                        && ms / 2 <= range.max
                    {
                        durations.push((scale, around));
                    }
                }
                durations.push((KIND_RANGE, range));
                durations.push((
                    RANGE_MAX,
                    MsRange {
                        min: range.max,
                        max: range.max,
                    },
                ));
                durations.push((
                    RANGE_MIN,
                    MsRange {
                        min: range.min,
                        max: range.min,
                    },
                ));
            }
            let draw = KindDraw {
                kind: kind.clone(),
                mean_every_ms: kind.every_ms.min,
                mean_duration_ms: kind.duration_ms.map(|r| r.min),
                uniform: true,
            };
            let (mut inserted, _) = swarm::draw_fault(&draw, at_ms, rng);
            let role = self.retarget(&mut inserted, &kind.nodes, name, &anchor, rng);
            arms.push(Arm::MarkKind(anchor.mark, name));
            arms.push(Arm::Offset(name, offset_scale));
            if !durations.is_empty() {
                let duration_weights: Vec<f64> = durations
                    .iter()
                    .map(|(scale, _)| {
                        bound_weight(scale) * self.prior.weight(&Arm::Duration(name, scale))
                    })
                    .collect();
                let (duration_scale, range) = durations[roulette(&duration_weights, rng)];
                if let Some(lasts) = lasts_mut(&mut inserted) {
                    *lasts = Some(if duration_scale == KIND_RANGE {
                        rng.gen_range(range.min..=range.max)
                    } else {
                        swarm::log_uniform(rng, range)
                    });
                }
                arms.push(Arm::Duration(name, duration_scale));
            }
            if let Some(bound) = self.extreme_parameter(&mut inserted, kind, rng) {
                arms.push(Arm::Parameter(name, bound));
            }
            arms.extend(role.map(|role| Arm::Target(name, role)));
            faults.push(as_scripted(&inserted, heal_at_ms));
        }
        if arms.len() == 1 {
            return None;
        }
        swarm::sort_by_time(&mut faults);
        Some((
            faults,
            anchor.seed,
            Choice {
                arms,
                anchor_progress: anchor.progress,
            },
        ))
    }

    /// Sets a fault's drawn parameter (a clock jump's `delta_ms`, a drift's `rate`, a delay's
    /// `extra_ms`) to a bound of the kind's range, or leaves it as drawn, as the prior weighs
    /// the three (AFL's "interesting values": a fault's bound is where bugs are); the choice,
    /// or `None` for a kind without a parameter.
    fn extreme_parameter(
        &self,
        fault: &mut Fault,
        kind: &KindSpec,
        rng: &mut ChaCha8Rng,
    ) -> Option<&'static str> {
        let name = kind_name(&kind.kind);
        let has_parameter = matches!(
            fault.kind,
            FaultKind::ClockJump { .. } | FaultKind::ClockDrift { .. } | FaultKind::Delay { .. }
        );
        if !has_parameter {
            return None;
        }
        let choices = [DRAWN, RANGE_MAX, RANGE_MIN];
        let weights: Vec<f64> = choices
            .iter()
            .map(|c| bound_weight(c) * self.prior.weight(&Arm::Parameter(name, c)))
            .collect();
        let choice = choices[roulette(&weights, rng)];
        let high = choice == RANGE_MAX;
        if choice != DRAWN {
            match &mut fault.kind {
                FaultKind::ClockJump { delta_ms, .. } => {
                    let (a, b) = kind.delta_ms?;
                    *delta_ms = if high { b } else { a };
                }
                FaultKind::ClockDrift { rate, .. } => {
                    let (a, b) = kind.rate?;
                    *rate = ((if high { b } else { a }) * 1000.0).round() / 1000.0;
                }
                FaultKind::Delay { extra_ms, .. } => {
                    let range = kind.extra_ms?;
                    *extra_ms = (if high { range.max } else { range.min }).max(1);
                }
                _ => {}
            }
        }
        Some(choice)
    }

    /// Names the target of a one-node fault by a role drawn by its weight (see the module
    /// doc) and a node of that role at the anchor; the role, or `None` for a fault on a link
    /// or a group.
    fn retarget(
        &self,
        fault: &mut Fault,
        nodes: &[String],
        kind: &'static str,
        anchor: &Anchor,
        rng: &mut ChaCha8Rng,
    ) -> Option<String> {
        let node = fault.kind.single_node_mut()?;
        let role_of = |n: &String| -> String {
            if n.starts_with("client-") {
                if anchor.holders.contains(n) {
                    "holder"
                } else {
                    "peer"
                }
                .to_string()
            } else {
                anchor
                    .server_roles
                    .get(n)
                    .map_or_else(|| n.clone(), |role| role.to_string())
            }
        };
        let roles: Vec<String> = nodes
            .iter()
            .map(role_of)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if roles.is_empty() {
            return None;
        }
        let weights: Vec<f64> = roles
            .iter()
            .map(|r| {
                let holder = if r == "holder" { HOLDER_WEIGHT } else { 1.0 };
                holder * self.prior.weight(&Arm::Target(kind, r.clone()))
            })
            .collect();
        let role = roles[roulette(&weights, rng)].clone();
        let of_role: Vec<&String> = nodes.iter().filter(|n| role_of(n) == role).collect();
        *node = of_role[rng.gen_range(0..of_role.len())].clone();
        Some(role)
    }
}

/// A server that is a master at the anchor.
pub const MASTER: &str = "master";
/// A replica whose keys are its group master's (it acknowledged the last write).
pub const REPLICA_SYNCED: &str = "replica_synced";
/// A replica that lacks a key its group master has, or has one its master lost (a WAIT it
/// did not acknowledge; a failover to it loses the lock).
pub const REPLICA_LAGGING: &str = "replica_lagging";

/// The Redis servers' roles at `t_us`, from the trace: a master (by its last `role` event;
/// before one, a name without `-replica-`), or a replica synced with or lagging behind its
/// group's master (the group: the name before `-replica-`) by the keys' owners (`key_owner`
/// events). A fault on "the replica that acknowledged" or "the one that did not" then names
/// the same role whichever replica that was in the run (Sentinel promotes the replica with
/// the best offset: redis 7.0.15 src/sentinel.c sentinelSelectSlave).
pub fn server_roles_at(events: &[Event], t_us: u64) -> BTreeMap<String, &'static str> {
    let mut master: BTreeMap<String, bool> = BTreeMap::new();
    let mut owners: BTreeMap<String, BTreeMap<String, Option<String>>> = BTreeMap::new();
    for e in events.iter().take_while(|e| e.t_us <= t_us) {
        match &e.kind {
            EventKind::Replication { what, detail } if what == "role" => {
                master.insert(e.node.clone(), detail.starts_with("master"));
            }
            EventKind::KeyOwner { key, owner, .. } => {
                master
                    .entry(e.node.clone())
                    .or_insert_with(|| !e.node.contains("-replica-"));
                owners
                    .entry(e.node.clone())
                    .or_default()
                    .insert(key.clone(), owner.clone());
            }
            _ => {}
        }
    }
    let group = |node: &str| node.split("-replica-").next().unwrap_or(node).to_string();
    let keys_of = |node: &str| owners.get(node).cloned().unwrap_or_default();
    let same_keys = |a: &BTreeMap<String, Option<String>>, b: &BTreeMap<String, Option<String>>| {
        let held = |m: &BTreeMap<String, Option<String>>| -> BTreeMap<String, String> {
            m.iter()
                .filter_map(|(k, o)| o.clone().map(|o| (k.clone(), o)))
                .collect()
        };
        held(a) == held(b)
    };
    let mut roles = BTreeMap::new();
    for (node, is_master) in &master {
        let role = if *is_master {
            MASTER
        } else {
            let masters: Vec<&String> = master
                .iter()
                .filter(|(m, is)| **is && group(m) == group(node))
                .map(|(m, _)| m)
                .collect();
            let mine = keys_of(node);
            if masters.iter().all(|m| same_keys(&keys_of(m), &mine)) {
                REPLICA_SYNCED
            } else {
                REPLICA_LAGGING
            }
        };
        roles.insert(node.clone(), role);
    }
    roles
}

/// The client processes that hold the lock at `t_us`: their last `acquired` before it has no
/// `released` after it (a worker thread's hold counts for its process).
pub fn holders_at(events: &[Event], t_us: u64) -> BTreeSet<String> {
    let mut holds: BTreeMap<String, u32> = BTreeMap::new();
    for e in events.iter().take_while(|e| e.t_us <= t_us) {
        let owner = model::history::owner_name(&e.node, e.thread);
        match e.kind {
            EventKind::Acquired { .. } => {
                holds.insert(owner, 1);
            }
            EventKind::Released { .. } => {
                holds.remove(&owner);
            }
            _ => {}
        }
    }
    holds
        .into_keys()
        .map(|owner| model::history::owner_node(&owner).to_string())
        .collect()
}

/// A nemesis kind's name as a `'static` (the kinds `scenario::nemesis` knows); an unknown
/// name counts as `other`.
fn kind_name(kind: &str) -> &'static str {
    crate::scenario::nemesis::KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hunt::features::tests::{event, key};
    use rand::SeedableRng;

    /// The role the child's target arm names.
    fn target_role(choice: &Choice, why: &str) -> String {
        choice
            .arms
            .iter()
            .find_map(|a| match a {
                Arm::Target(_, role) => Some(role.clone()),
                _ => None,
            })
            .expect(why)
    }

    fn nemesis() -> NemesisSpec {
        let nodes: std::collections::BTreeSet<String> =
            ["client-1", "client-2", "redis-1"].map(String::from).into();
        let json = serde_json::json!({
            "pause": { "every_ms": [100, 10000], "duration_ms": [10, 3000], "nodes": ["client-1", "client-2"] },
            "crash": { "every_ms": [500, 20000], "duration_ms": [3000, 6000], "nodes": ["redis-1"] }
        });
        NemesisSpec::from_json(&json, &nodes, 60_000).expect("a valid nemesis")
    }

    fn pause(at_ms: u64) -> Fault {
        Fault {
            kind: crate::scenario::faults::FaultKind::Pause {
                node: "client-1".into(),
            },
            when: crate::scenario::faults::When::At { at_ms },
            duration_ms: Some(100),
        }
    }

    fn scales() -> TimeScales {
        TimeScales(vec![("latency", 5), ("down_after", 1000)])
    }

    /// The tests' common step: an anchor at `at` (mark, µs) of a run on `seed` without faults,
    /// then one child drawn before anything is learnt (heal at 10 s).
    fn child_of_new_anchor(
        anchors: &mut Anchors,
        spec: &NemesisSpec,
        seed: u64,
        at: (Mark, u64),
        events: &[Event],
        rng: &mut ChaCha8Rng,
    ) -> (Vec<Fault>, u64, Choice) {
        anchors.add(&[], seed, &[at], events, 10_000);
        anchors
            .child(spec, &scales(), 10_000, false, &|_| 1, rng)
            .expect("an anchor waits")
    }

    #[test]
    fn a_child_keeps_the_prefix_and_inserts_up_to_three_faults_after_the_anchor() {
        let parent = vec![pause(100), pause(900), pause(5000)];
        let mut anchors = Anchors::default();
        anchors.add(&parent, 7, &[(Mark::WaitShort, 1_200_000)], &[], 10_000);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut stacks = BTreeSet::new();
        for _ in 0..CHILDREN_PER_ANCHOR {
            let (child, seed, choice) = anchors
                .child(&nemesis(), &scales(), 10_000, false, &|_| 1, &mut rng)
                .expect("an anchor waits");
            assert_eq!(seed, 7);
            let Arm::Stack(stack) = choice.arms[0] else {
                panic!("{choice:?}");
            };
            assert_eq!(child.len(), 2 + stack, "{child:?}");
            stacks.insert(stack);
            assert_eq!(&child[..2], &parent[..2]);
            for inserted in &child[2..] {
                // At most the largest scale (1 s) after the anchor at 1.2 s.
                let at = swarm::at_ms(inserted);
                assert!((1201..=2200).contains(&at), "{at}");
            }
            assert!(matches!(choice.arms[1], Arm::MarkKind(Mark::WaitShort, _)));
        }
        assert!(stacks.len() >= 2, "{stacks:?}");
        assert!(anchors.is_empty(), "the anchor gave all its children");
        // Past the heal: no anchor.
        anchors.add(&parent, 7, &[(Mark::WaitShort, 9_999_500)], &[], 10_000);
        assert!(anchors.is_empty());
    }

    #[test]
    fn a_pause_names_the_holder_at_the_anchor_by_its_role() {
        let acquired = || EventKind::Acquired {
            token: "t".into(),
            fence: None,
        };
        let released = || EventKind::Released {
            ok: true,
            detail: String::new(),
        };
        let events = vec![
            event(100, "client-1", acquired()),
            event(300, "client-1", released()),
            event(400, "client-2", acquired()),
        ];
        assert_eq!(
            holders_at(&events, 250_000),
            ["client-1".to_string()].into()
        );
        assert!(holders_at(&events, 350_000).is_empty());
        assert_eq!(
            holders_at(&events, 500_000),
            ["client-2".to_string()].into()
        );
        let mut anchors = Anchors::default();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut paused_by_role = BTreeMap::new();
        // A point is anchored once: each round on a seed of its own.
        for round in 0..300 {
            let (child, _, choice) = child_of_new_anchor(
                &mut anchors,
                &nemesis(),
                round,
                (Mark::AcquireGranted, 500_000),
                &events,
                &mut rng,
            );
            if choice.arms[0] != Arm::Stack(1) {
                continue;
            }
            if let crate::scenario::faults::FaultKind::Pause { node } = &child[0].kind {
                let role = target_role(&choice, "a pause names its target's role");
                let expected = if role == "holder" {
                    "client-2"
                } else {
                    "client-1"
                };
                assert_eq!(node, expected, "{role}");
                *paused_by_role.entry(role).or_insert(0) += 1;
            }
        }
        assert_eq!(paused_by_role.len(), 2, "{paused_by_role:?}");
    }

    #[test]
    fn servers_are_named_by_their_role_in_the_run_at_the_anchor() {
        let role = |node: &str, detail: &str| {
            event(
                0,
                node,
                EventKind::Replication {
                    what: "role".into(),
                    detail: detail.into(),
                },
            )
        };
        let owner =
            |t_ms: u64, node: &str, owner: Option<&str>| key(t_ms, node, owner, "replication");
        // The master writes the key; one replica has it at 200 ms, the other does not.
        let lagging = |synced: &str| {
            vec![
                role("redis-1-replica-1", "replica of redis-1"),
                role("redis-1-replica-2", "replica of redis-1"),
                owner(100, "redis-1", Some("client-1")),
                owner(102, synced, Some("client-1")),
            ]
        };
        let roles = server_roles_at(&lagging("redis-1-replica-1"), 200_000);
        assert_eq!(roles["redis-1"], MASTER);
        assert_eq!(roles["redis-1-replica-1"], REPLICA_SYNCED);
        assert_eq!(roles["redis-1-replica-2"], REPLICA_LAGGING);
        // The other replica caught up: synced; promoted: a master.
        let mut events = lagging("redis-1-replica-1");
        events.push(owner(300, "redis-1-replica-2", Some("client-1")));
        assert_eq!(
            server_roles_at(&events, 300_000)["redis-1-replica-2"],
            REPLICA_SYNCED
        );
        events.push(event(
            400,
            "redis-1-replica-2",
            EventKind::Replication {
                what: "role".into(),
                detail: "master (REPLICAOF NO ONE)".into(),
            },
        ));
        assert_eq!(
            server_roles_at(&events, 400_000)["redis-1-replica-2"],
            MASTER
        );
        // A crash anchored at 200 ms on the lagging replica names whichever replica lagged.
        let nodes: BTreeSet<String> = ["redis-1", "redis-1-replica-1", "redis-1-replica-2"]
            .map(String::from)
            .into();
        let json = serde_json::json!({
            "crash": { "every_ms": [500, 20000], "duration_ms": [3000, 6000],
                       "nodes": ["redis-1-replica-1", "redis-1-replica-2"] }
        });
        let spec = NemesisSpec::from_json(&json, &nodes, 60_000).expect("a valid nemesis");
        for (synced, lagging_node) in [
            ("redis-1-replica-1", "redis-1-replica-2"),
            ("redis-1-replica-2", "redis-1-replica-1"),
        ] {
            let events = lagging(synced);
            let mut anchors = Anchors::default();
            let mut rng = ChaCha8Rng::seed_from_u64(6);
            let mut by_role = BTreeMap::new();
            for round in 0..60 {
                let (child, _, choice) = child_of_new_anchor(
                    &mut anchors,
                    &spec,
                    round,
                    (Mark::WaitPartiallyAcked, 200_000),
                    &events,
                    &mut rng,
                );
                let role = target_role(&choice, "a crash names its target's role");
                let node = child[0].kind.node_names()[0].to_string();
                let expected = if role == REPLICA_LAGGING {
                    lagging_node
                } else {
                    synced
                };
                assert_eq!(node, expected, "{role}");
                *by_role.entry(role).or_insert(0) += 1;
            }
            assert_eq!(by_role.len(), 2, "{by_role:?}");
        }
    }

    #[test]
    fn a_point_is_anchored_once() {
        let mut anchors = Anchors::default();
        for _ in 0..3 {
            anchors.add(&[], 1, &[(Mark::KeyExpired, 2_000_000)], &[], 10_000);
        }
        anchors.add_on_path(&[], 1, (Mark::KeyExpired, 2_000_000), 1, &[], 10_000);
        assert_eq!(anchors.waiting.len(), 1);
        // The same mark at the same time of another seed is another point.
        anchors.add(&[], 2, &[(Mark::KeyExpired, 2_000_000)], &[], 10_000);
        assert_eq!(anchors.waiting.len(), 2);
    }

    #[test]
    fn directed_children_come_from_the_anchors_furthest_along_the_path() {
        let mut anchors = Anchors::default();
        anchors.add(&[], 1, &[(Mark::AcquireGranted, 1_000_000)], &[], 10_000);
        anchors.add_on_path(
            &[],
            2,
            (Mark::ClockJumpWhileHeld, 2_000_000),
            1,
            &[],
            10_000,
        );
        anchors.add_on_path(&[], 3, (Mark::LockKeyExpired, 3_000_000), 2, &[], 10_000);
        assert_eq!(anchors.furthest(), 2);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        for _ in 0..CHILDREN_PER_ANCHOR {
            let (_, seed, choice) = anchors
                .child(&nemesis(), &scales(), 10_000, true, &|_| 1, &mut rng)
                .expect("an anchor waits");
            assert_eq!((seed, choice.anchor_progress), (3, 2));
        }
        // It gave all its children: the next furthest.
        assert_eq!(anchors.furthest(), 1);
        // Blind: any anchor, the rarer mark (fewer runs reached it) more often.
        let hits = |m: Mark| if m == Mark::AcquireGranted { 1 } else { 1000 };
        let (_, seed, _) = anchors
            .child(&nemesis(), &scales(), 10_000, false, &hits, &mut rng)
            .expect("an anchor waits");
        assert_eq!(seed, 1);
    }

    #[test]
    fn an_anchor_past_every_kind_it_did_not_exercise_is_drawn_less() {
        let spec = nemesis();
        let t_us = 5_000_000;
        let at = |ms| crate::scenario::faults::When::At { at_ms: ms };
        // A pause and a crash open at the anchor: its children could only repeat them.
        let mut crash = pause(4_990);
        crash.kind = crate::scenario::faults::FaultKind::Crash {
            node: "redis-1".into(),
            restart_after_ms: Some(3000),
        };
        crash.duration_ms = None;
        crash.when = at(4_990);
        let mut stale = Anchors::default();
        stale.add(
            &[pause(4_990), crash],
            1,
            &[(Mark::KeyExpired, t_us)],
            &[],
            10_000,
        );
        stale.add(&[], 2, &[(Mark::KeyExpired, t_us)], &[], 10_000);
        let fresh = |a: &Anchor| fresh_kinds(a, &spec, &scales(), 10_000);
        assert_eq!(fresh(&stale.waiting[0]), 0);
        assert_eq!(fresh(&stale.waiting[1]), 2);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let picked_stale = (0..400)
            .filter(|_| stale.pick(false, &|_| 1, &fresh, &mut rng) == 0)
            .count();
        // Weights 0.1 and 2: about 5 %.
        assert!(picked_stale < 40, "{picked_stale} of 400");
    }

    #[test]
    fn the_holder_and_a_ranges_upper_bound_come_first_before_anything_is_learnt() {
        let acquired = EventKind::Acquired {
            token: "t".into(),
            fence: None,
        };
        let events = vec![event(100, "client-1", acquired)];
        let mut anchors = Anchors::default();
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        let (mut holder, mut peer, mut longest, mut pauses) = (0, 0, 0, 0);
        for round in 0..600 {
            let (child, _, _) = child_of_new_anchor(
                &mut anchors,
                &nemesis(),
                round,
                (Mark::AcquireGranted, 500_000),
                &events,
                &mut rng,
            );
            for f in &child {
                if let crate::scenario::faults::FaultKind::Pause { node } = &f.kind {
                    pauses += 1;
                    if node == "client-1" {
                        holder += 1;
                    } else {
                        peer += 1;
                    }
                    longest += usize::from(f.duration_ms == Some(3000));
                }
            }
        }
        assert!(holder > peer * 3 / 2, "holder {holder}, peer {peer}");
        // The upper bound: weight 2 of 6 (latency, down-after, the range, its bounds).
        assert!(longest * 4 > pauses, "{longest} of {pauses} pauses at 3 s");
    }

    #[test]
    fn the_prior_favours_the_arms_that_reached_new_features() {
        // The last 200 of 400 children, with and without crediting their arms.
        let crash_only_children = |learn: bool| {
            let mut anchors = Anchors::default();
            let mut rng = ChaCha8Rng::seed_from_u64(2);
            let mut late = 0;
            for round in 0..400 {
                let (child, _, choice) = child_of_new_anchor(
                    &mut anchors,
                    &nemesis(),
                    round,
                    (Mark::ReplicaPromoted, 1_000_000),
                    &[],
                    &mut rng,
                );
                // A child with crashes alone always reaches something new, one with a pause
                // never.
                let crash_only = child.iter().all(|f| f.kind.name() == "crash");
                if learn {
                    anchors.prior.credit(&choice, crash_only);
                }
                if round >= 200 {
                    late += usize::from(crash_only);
                }
            }
            late
        };
        let (learnt, unlearnt) = (crash_only_children(true), crash_only_children(false));
        assert!(
            learnt > unlearnt + 50,
            "crash-only children of the last 200: {learnt} learning, {unlearnt} not"
        );
    }

    #[test]
    fn durations_stay_in_the_kinds_range_around_the_scales_that_meet_it() {
        let spec = nemesis();
        let mut anchors = Anchors::default();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut around_down_after = Vec::new();
        for round in 0..300 {
            let (child, _, choice) = child_of_new_anchor(
                &mut anchors,
                &spec,
                round,
                (Mark::KeyExpired, 2_000_000),
                &[],
                &mut rng,
            );
            // Sentinel's down-after (1 s) is no scale of a 3-6 s restart.
            assert!(!choice.arms.contains(&Arm::Duration("crash", "down_after")));
            for f in &child {
                let range = spec.kinds.iter().find(|k| k.kind == f.kind.name()).unwrap();
                let range = range.duration_ms.unwrap();
                let lasts = f.kind.restart_after_ms().unwrap_or(f.duration_ms).unwrap();
                assert!((range.min..=range.max).contains(&lasts), "{f:?}");
            }
            if choice.arms
                == [
                    Arm::Stack(1),
                    Arm::MarkKind(Mark::KeyExpired, "pause"),
                    choice.arms[2].clone(),
                    Arm::Duration("pause", "down_after"),
                    choice.arms[4].clone(),
                ]
            {
                around_down_after.push(child[0].duration_ms.unwrap());
            }
        }
        assert!(!around_down_after.is_empty());
        assert!(
            around_down_after.iter().all(|d| (500..=2000).contains(d)),
            "{around_down_after:?}"
        );
    }
}
