//! A deterministic change signal: a counter that tasks can wait on.
//!
//! tokio's `watch` channel cannot be used in the simulation: it spreads its waiters over eight
//! `Notify`s picked with a per-thread random number seeded from a process-wide counter, so the
//! order in which waiting tasks are woken — and with it madsim's schedule — differs between
//! two runs in one process. This signal wakes its waiters in the order they started waiting.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Clone, Default)]
pub struct Signal {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    value: u64,
    wakers: Vec<Waker>,
}

impl Signal {
    pub fn new() -> Signal {
        Signal::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("never poisoned")
    }

    /// How many times it was bumped.
    pub fn value(&self) -> u64 {
        self.lock().value
    }

    pub fn is_set(&self) -> bool {
        self.value() > 0
    }

    /// Counts one change and wakes every waiter.
    pub fn bump(&self) {
        let wakers = {
            let mut inner = self.lock();
            inner.value += 1;
            std::mem::take(&mut inner.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Sets a one-way flag (the first bump); later calls change nothing.
    pub fn set(&self) {
        if !self.is_set() {
            self.bump();
        }
    }

    /// Resolves once the value differs from `seen`.
    pub fn changed_from(&self, seen: u64) -> Changed {
        Changed {
            signal: self.clone(),
            seen,
        }
    }

    /// Resolves once the flag is set.
    pub fn wait_set(&self) -> Changed {
        self.changed_from(0)
    }
}

pub struct Changed {
    signal: Signal,
    seen: u64,
}

impl Future for Changed {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.signal.lock();
        if inner.value != self.seen {
            return Poll::Ready(());
        }
        if !inner.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            inner.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
