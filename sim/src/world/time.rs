//! Time: the run's true simulated time and every node's own clock.
//!
//! madsim has one global simulated clock; real machines do not agree on the time. A `NodeClock`
//! maps true simulated time to what one node reads: its wall clock (Unix ms, which `clock_jump`
//! moves and `clock_drift` speeds up or slows down) and its monotonic clock (drifts with the
//! node's oscillator but never jumps) — Kleppmann 2016, "timing assumptions".
//!
//! Fault hooks: `jump` (`clock_jump`), `set_rate` (`clock_drift`, and its healing).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

use madsim::time::{Duration, Instant, TimeHandle};

/// The run's clocks: true time since the start, and one `NodeClock` per node (created on first
/// use, at the epoch).
pub struct Time {
    /// The runtime's clock, held so a read is one lock: `Instant::now()` goes through madsim's
    /// `clock_gettime` override, which looks the runtime up and clones its handle on every call
    /// (3 % of the baseline, issue 15).
    clock: TimeHandle,
    start: Duration,
    clocks: Mutex<BTreeMap<String, NodeClock>>,
    /// Told each node's clock after every change, for a real process behind the node (`live`):
    /// the node, its wall clock's offset from true time (ms) and its rate.
    external: OnceLock<ClockListener>,
}

/// See `Time::set_external`.
pub type ClockListener = Arc<dyn Fn(&str, i64, f64) + Send + Sync>;

impl Time {
    /// Starts the run's true time now. Called inside the simulation.
    pub fn new() -> Time {
        let clock = TimeHandle::current();
        Time {
            start: clock.elapsed(),
            clock,
            clocks: Mutex::default(),
            external: OnceLock::new(),
        }
    }

    /// Registers the listener of clock changes (once, before any runs).
    pub fn set_external(&self, listener: ClockListener) {
        if self.external.set(listener).is_err() {
            panic!("a run registers one clock listener");
        }
    }

    /// Tells the listener `node`'s clock as it is now.
    fn changed(&self, node: &str) {
        if let Some(listener) = self.external.get() {
            let now = self.now_us();
            let (offset_ms, rate) = self.read_clock(node, |c| {
                (c.wall_ms(now) - EPOCH_MS - (now / 1000) as i64, c.rate)
            });
            listener(node, offset_ms, rate);
        }
    }

    /// True simulated time since the start of the run.
    pub fn now_us(&self) -> u64 {
        (self.clock.elapsed() - self.start).as_micros() as u64
    }

    /// A reader of [`Time::now_us`] that needs no `World` (`locksim hunt` stamps its marks with
    /// it).
    pub fn reader(&self) -> Box<dyn Fn() -> u64> {
        let (clock, start) = (self.clock.clone(), self.start);
        Box::new(move || (clock.elapsed() - start).as_micros() as u64)
    }

    /// The runtime's clock now, as madsim's timers count it.
    pub fn now_instant(&self) -> Instant {
        self.clock.now_instant()
    }

    /// Calls `waker.wake()` once at `deadline` (at least 1 ms from now, as every madsim sleep),
    /// without a task of its own: the timer is the one a madsim `Sleep` registers for the waker
    /// it is polled with (madsim 0.2.34 `sim/time/sleep.rs` `Sleep::poll`, `sim/time/mod.rs`
    /// `add_timer_at`). madsim runs timer callbacks with its timer wheel locked, so `waker`
    /// must not touch madsim's timers (waking a task is fine).
    pub fn wake_at(&self, deadline: Instant, waker: &Waker) {
        let mut sleep = self.clock.sleep_until(deadline);
        let pending = Pin::new(&mut sleep)
            .poll(&mut Context::from_waker(waker))
            .is_pending();
        debug_assert!(pending, "a madsim sleep lasts at least 1 ms");
    }

    /// `future` for at most `limit`. madsim's own `timeout` leaves its timer behind when the
    /// future wins (madsim's timers cannot be cancelled) and adds one more each time it is
    /// polled, and each of them wakes the task again at the deadline: a poll for nothing, and a
    /// draw of madsim's random generator, per command with a timeout. This one registers one
    /// timer, and its timer finds nothing to wake once the timeout is gone.
    pub fn timeout<F: Future>(&self, limit: Duration, future: F) -> Timeout<F> {
        Timeout {
            future,
            deadline: self.clock.now_instant() + limit,
            clock: self.clock.clone(),
            alarm: None,
        }
    }

    fn with_clock<R>(&self, node: &str, f: impl FnOnce(&mut NodeClock) -> R) -> R {
        let mut clocks = self.clocks.lock().expect("never poisoned");
        f(clocks.entry(node.to_string()).or_default())
    }

    /// Reads a node's clock. Clocks are read on every command, timer and Sentinel message
    /// (issue 15: a `String` key per read was 12 % of a Sentinel swarm): a read borrows the name,
    /// and a node whose clock was never changed reads the default clock.
    fn read_clock<R>(&self, node: &str, f: impl FnOnce(&NodeClock) -> R) -> R {
        let clocks = self.clocks.lock().expect("never poisoned");
        match clocks.get(node) {
            Some(clock) => f(clock),
            None => f(&NodeClock::default()),
        }
    }

    /// The node's wall clock (Unix ms) now.
    pub fn wall_ms(&self, node: &str) -> i64 {
        let now = self.now_us();
        self.read_clock(node, |c| c.wall_ms(now))
    }

    /// The node's monotonic clock (ms) now.
    pub fn mono_ms(&self, node: &str) -> u64 {
        let now = self.now_us();
        self.read_clock(node, |c| c.mono_ms(now))
    }

    /// True time that passes while `node`'s clock advances `local_ms`: a sleep measured by a
    /// drifting oscillator.
    pub fn true_duration_us(&self, node: &str, local_ms: u64) -> u64 {
        self.read_clock(node, |c| c.true_duration_us(local_ms))
    }

    /// `clock_jump`: steps the node's wall clock by `delta_ms` now.
    pub fn jump(&self, node: &str, delta_ms: i64) {
        let now = self.now_us();
        self.with_clock(node, |c| c.jump(now, delta_ms));
        self.changed(node);
    }

    /// `clock_drift`: from now on the node's clocks run at `rate` × true time (1.0 heals it).
    pub fn set_rate(&self, node: &str, rate: f64) {
        let now = self.now_us();
        self.with_clock(node, |c| c.set_rate(now, rate));
        self.changed(node);
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Time::timeout`]: the future's output, or `Err(Elapsed)` at the deadline.
    pub struct Timeout<F> {
        #[pin]
        future: F,
        deadline: Instant,
        clock: TimeHandle,
        alarm: Option<Alarm>,
    }
}

pub use madsim::time::error::Elapsed;

/// The waker a timeout's timer wakes: whoever waits, or nobody once the timeout is dropped.
struct Alarm(Arc<AlarmWaker>);

#[derive(Default)]
struct AlarmWaker {
    waker: Mutex<Option<Waker>>,
}

impl Wake for AlarmWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = self.waker.lock().expect("never poisoned").take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Alarm {
    /// Sets the timer at `deadline` for the task of `cx`.
    fn set(clock: &TimeHandle, deadline: Instant, cx: &Context<'_>) -> Alarm {
        let alarm = Arc::new(AlarmWaker {
            waker: Mutex::new(Some(cx.waker().clone())),
        });
        let mut sleep = clock.sleep_until(deadline);
        let _ = Pin::new(&mut sleep).poll(&mut Context::from_waker(&Waker::from(alarm.clone())));
        Alarm(alarm)
    }

    /// The task of `cx` is the one to wake now.
    fn update(&self, cx: &Context<'_>) {
        let mut waker = self.0.waker.lock().expect("never poisoned");
        if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *waker = Some(cx.waker().clone());
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        self.0.waker.lock().expect("never poisoned").take();
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        if this.clock.now_instant() >= *this.deadline {
            return Poll::Ready(Err(Elapsed));
        }
        match this.alarm {
            Some(alarm) => alarm.update(cx),
            None => *this.alarm = Some(Alarm::set(this.clock, *this.deadline, cx)),
        }
        Poll::Pending
    }
}

impl Default for Time {
    fn default() -> Self {
        Time::new()
    }
}

/// The Unix time (ms) every wall clock reads at the start of a run: 2023-11-14T22:13:20Z.
pub const EPOCH_MS: i64 = 1_700_000_000_000;

/// A piecewise-linear clock: since `base_true_us` it has advanced at `rate` from `base_local_us`.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClock {
    base_true_us: u64,
    wall_base_us: i64,
    mono_base_us: f64,
    rate: f64,
}

impl Default for NodeClock {
    fn default() -> Self {
        NodeClock {
            base_true_us: 0,
            wall_base_us: EPOCH_MS * 1000,
            mono_base_us: 0.0,
            rate: 1.0,
        }
    }
}

impl NodeClock {
    fn elapsed_local_us(&self, true_us: u64) -> f64 {
        (true_us.saturating_sub(self.base_true_us)) as f64 * self.rate
    }

    /// Wall-clock Unix time in ms at true time `true_us` (what `System.currentTimeMillis()`
    /// or Redis's `mstime()` return on this node).
    pub fn wall_ms(&self, true_us: u64) -> i64 {
        self.wall_base_us
            .saturating_add(self.elapsed_local_us(true_us) as i64)
            .div_euclid(1000)
    }

    /// Monotonic ms since the start of the run, as this node measures it.
    pub fn mono_ms(&self, true_us: u64) -> u64 {
        ((self.mono_base_us + self.elapsed_local_us(true_us)) / 1000.0) as u64
    }

    /// How much true time passes while this node's clocks advance `local_ms`.
    pub fn true_duration_us(&self, local_ms: u64) -> u64 {
        (local_ms as f64 * 1000.0 / self.rate).round() as u64
    }

    fn rebase(&mut self, true_us: u64) {
        let elapsed = self.elapsed_local_us(true_us);
        self.wall_base_us = self.wall_base_us.saturating_add(elapsed as i64);
        self.mono_base_us += elapsed;
        self.base_true_us = true_us;
    }

    /// Steps the wall clock by `delta_ms` (NTP step, operator error): monotonic time is unaffected.
    /// Jumps saturate: a random nemesis may pile up more of them than an i64 of µs holds.
    pub fn jump(&mut self, true_us: u64, delta_ms: i64) {
        self.rebase(true_us);
        self.wall_base_us = self
            .wall_base_us
            .saturating_add(delta_ms.saturating_mul(1000));
    }

    /// From now on the clock runs at `rate` × true time (1.5 = 50 % fast).
    pub fn set_rate(&mut self, true_us: u64, rate: f64) {
        self.rebase(true_us);
        self.rate = rate;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_moves_wall_time_only() {
        let mut c = NodeClock::default();
        assert_eq!(c.wall_ms(5_000), EPOCH_MS + 5);
        c.jump(10_000, 60_000);
        assert_eq!(c.wall_ms(10_000), EPOCH_MS + 60_010);
        assert_eq!(c.mono_ms(10_000), 10);
        c.jump(20_000, -120_000);
        assert_eq!(c.wall_ms(20_000), EPOCH_MS - 59_980);
    }

    #[test]
    fn drift_scales_both_clocks_from_the_change_on() {
        let mut c = NodeClock::default();
        c.set_rate(1_000_000, 1.5);
        assert_eq!(c.mono_ms(3_000_000), 1000 + 3000);
        assert_eq!(c.wall_ms(3_000_000), EPOCH_MS + 4000);
        assert_eq!(c.true_duration_us(300), 200_000);
    }
}
