//! Running lock schemes outside the simulation, on a virtual clock: what the scheme unit tests'
//! `testing::DirectEnv` and the conformance suite's model side (`sim::conform::model_side`)
//! share. Pure: no madsim, no I/O, no threads.
//!
//! - [`VirtualTime`]: the clock every client of a world reads, the wake-ups its sleeps asked
//!   for, and the background tasks (`LockEnv::spawn`: watchdogs, refresh timers). Time only
//!   moves when the driver says so, once everything waits: a driver polls its futures and
//!   `poll_tasks`, then moves the clock to `next_wakeup` (or its own next event).
//! - [`Mailboxes`]: pub/sub messages a server pushed to subscribed connections, and the
//!   `Subscription::next_message` that waits for them on the virtual clock.
//! - [`XorShift`]: a client's deterministic random stream.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::task::{Context, Poll};

use super::{LocalBoxFuture, TaskGuard};
use crate::redis::{ClientId, Reply};

/// The wall clock at virtual time 0 (Unix ms).
pub const EPOCH_MS: i64 = 1_700_000_000_000;

/// A background task and whether it was cancelled.
struct Task {
    future: LocalBoxFuture<'static, ()>,
    cancelled: Rc<Cell<bool>>,
}

/// The virtual clock of one world and its background tasks.
#[derive(Default)]
pub struct VirtualTime {
    /// Milliseconds since the world started: every client's monotonic clock.
    now_ms: Cell<u64>,
    /// Deadlines of the sleeps that were pending at the last poll.
    wakeups: RefCell<BTreeSet<u64>>,
    tasks: RefCell<Vec<Task>>,
}

impl VirtualTime {
    pub fn now_ms(&self) -> u64 {
        self.now_ms.get()
    }

    /// The wall clock (Unix ms) every client of this world reads.
    pub fn wall_ms(&self) -> i64 {
        EPOCH_MS + self.now_ms.get() as i64
    }

    pub fn advance(&self, ms: u64) {
        self.now_ms.set(self.now_ms.get() + ms);
    }

    /// Moves the clock to `ms` (a driver's next event).
    pub fn set_now_ms(&self, ms: u64) {
        self.now_ms.set(ms);
    }

    /// Something waits until `ms`: the driver must not move the clock past it without polling.
    pub fn wake_at(&self, ms: u64) {
        self.wakeups.borrow_mut().insert(ms);
    }

    /// Forgets the wake-ups of the last round (each pending future asks again when polled).
    pub fn clear_wakeups(&self) {
        self.wakeups.borrow_mut().clear();
    }

    /// The earliest wake-up still ahead.
    pub fn next_wakeup(&self) -> Option<u64> {
        let now = self.now_ms.get();
        self.wakeups.borrow().iter().copied().find(|&w| w > now)
    }

    /// Ready once the clock reaches `until_ms`.
    pub async fn sleep_until(&self, until_ms: u64) {
        std::future::poll_fn(|_| {
            if self.now_ms.get() >= until_ms {
                Poll::Ready(())
            } else {
                self.wake_at(until_ms);
                Poll::Pending
            }
        })
        .await
    }

    /// Ready once `ms` have passed.
    pub async fn sleep_ms(&self, ms: u64) {
        self.sleep_until(self.now_ms.get() + ms).await
    }

    /// Adds a background task; cancelling its guard stops it before its next poll.
    pub fn spawn(&self, future: LocalBoxFuture<'static, ()>) -> Box<dyn TaskGuard> {
        let cancelled = Rc::new(Cell::new(false));
        self.tasks.borrow_mut().push(Task {
            future,
            cancelled: cancelled.clone(),
        });
        Box::new(Guard(cancelled))
    }

    /// Polls every background task once, dropping those finished or cancelled; true when a
    /// task polled here spawned another (not polled yet).
    pub fn poll_tasks(&self, cx: &mut Context<'_>) -> bool {
        let mut tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        tasks.retain_mut(|t| !t.cancelled.get() && t.future.as_mut().poll(cx).is_pending());
        // Tasks spawned while polling were pushed onto the (emptied) list.
        let mut list = self.tasks.borrow_mut();
        let spawned = !list.is_empty();
        tasks.append(&mut list);
        *list = tasks;
        spawned
    }

    /// How many background tasks are still running (not finished, not cancelled).
    pub fn running_tasks(&self) -> usize {
        self.tasks
            .borrow()
            .iter()
            .filter(|t| !t.cancelled.get())
            .count()
    }
}

struct Guard(Rc<Cell<bool>>);

impl TaskGuard for Guard {
    fn cancel(&self) {
        self.0.set(true);
    }
}

/// Pub/sub messages a server pushed, per subscribed connection, oldest first.
#[derive(Default)]
pub struct Mailboxes(RefCell<BTreeMap<ClientId, VecDeque<Reply>>>);

impl Mailboxes {
    pub fn deliver(&self, to: ClientId, push: Reply) {
        self.0.borrow_mut().entry(to).or_default().push_back(push);
    }

    /// The next `message` pushed to `conn`: its payload, or `None` once `timeout_ms` passed.
    pub async fn next_message(
        &self,
        time: &VirtualTime,
        conn: ClientId,
        timeout_ms: u64,
    ) -> Option<Vec<u8>> {
        let deadline = time.now_ms() + timeout_ms;
        std::future::poll_fn(|_| {
            let message = self
                .0
                .borrow_mut()
                .get_mut(&conn)
                .and_then(VecDeque::pop_front);
            match message {
                Some(Reply::Array(parts) | Reply::Push(parts)) if parts.len() == 3 => {
                    Poll::Ready(parts[2].as_bulk().map(<[u8]>::to_vec))
                }
                _ if time.now_ms() >= deadline => Poll::Ready(None),
                _ => {
                    time.wake_at(deadline);
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// xorshift64*: a client's own deterministic random stream, plenty for distinct tokens.
pub struct XorShift(Cell<u64>);

impl XorShift {
    /// Distinct seeds give distinct streams (the state must not be zero).
    pub fn seeded(seed: u64) -> XorShift {
        XorShift(Cell::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1))
    }

    pub fn next_u64(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_sleep_asks_for_its_wakeup_and_ends_there() {
        let time = Rc::new(VirtualTime::default());
        let mut cx = Context::from_waker(Waker::noop());
        let t = time.clone();
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        let guard = time.spawn(Box::pin(async move {
            t.sleep_ms(250).await;
            d.set(true);
        }));
        assert!(!time.poll_tasks(&mut cx));
        assert_eq!(time.next_wakeup(), Some(250));
        time.set_now_ms(249);
        time.poll_tasks(&mut cx);
        assert!(!done.get());
        time.set_now_ms(250);
        time.poll_tasks(&mut cx);
        assert!(done.get());
        assert_eq!(time.running_tasks(), 0);
        guard.cancel();
    }

    #[test]
    fn a_cancelled_task_is_not_polled_again() {
        let time = VirtualTime::default();
        let mut cx = Context::from_waker(Waker::noop());
        let polls = Rc::new(Cell::new(0));
        let p = polls.clone();
        let guard = time.spawn(Box::pin(std::future::poll_fn(move |_| {
            p.set(p.get() + 1);
            Poll::<()>::Pending
        })));
        time.poll_tasks(&mut cx);
        guard.cancel();
        time.poll_tasks(&mut cx);
        assert_eq!(polls.get(), 1);
        assert_eq!(time.running_tasks(), 0);
    }

    #[test]
    fn streams_differ_by_seed_and_repeat_for_one() {
        let (a, b, a2) = (
            XorShift::seeded(1),
            XorShift::seeded(2),
            XorShift::seeded(1),
        );
        let first = a.next_u64();
        assert_ne!(first, b.next_u64());
        assert_eq!(first, a2.next_u64());
        assert_ne!(a.next_u64(), first);
    }
}
