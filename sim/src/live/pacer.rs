//! The pacer: keeps the simulated world's time at most about a millisecond ahead of wall time,
//! and carries what the real side (sockets, client processes) sends into the simulation.
//!
//! Facts it rests on (madsim 0.2.34): inside a madsim context `clock_gettime` and
//! `gettimeofday` return simulated time (`src/sim/time/system_time.rs` 44-90), so `Instant` and
//! `recv_timeout` are simulated there: the real clock is read with a raw `clock_gettime`
//! syscall, and the thread blocks with `ppoll` on an eventfd. madsim refuses to start OS
//! threads inside a simulation (`src/sim/task/mod.rs` 771-783): every real thread is started
//! before the runtime, and talks to the simulation only through an [`Inbox`] that the pacer
//! drains at each step, waking early when something arrives.
//!
//! madsim advances time only when no task is ready; the pacer always has a timer 1 ms ahead, so
//! time advances 1 ms at a time at most, and after each step the pacer blocks the thread until
//! wall time caught up. A simulation slower than real time (a busy machine) is simply late: the
//! pacer then does not block at all until it caught up.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

/// The real monotonic clock in µs, whatever madsim does to `clock_gettime`.
pub fn real_now_us() -> u64 {
    raw_clock_us(libc::CLOCK_MONOTONIC)
}

/// The real wall clock (Unix µs), for the schedule-as-applied's wall times.
pub fn real_unix_us() -> u64 {
    raw_clock_us(libc::CLOCK_REALTIME)
}

/// A clock read by the raw syscall (madsim overrides the libc function).
fn raw_clock_us(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the raw syscall writes a timespec into a valid local.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            clock,
            &mut ts as *mut libc::timespec,
        );
    }
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// What real threads hand to the simulation: a queue and an eventfd that wakes the pacer.
pub struct Inbox<T> {
    queue: Mutex<Vec<T>>,
    wake: OwnedFd,
}

impl<T> Inbox<T> {
    pub fn new() -> std::io::Result<Inbox<T>> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Inbox {
            queue: Mutex::new(Vec::new()),
            // SAFETY: just created, owned here alone.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// From any real thread: queue `item` and wake the pacer.
    pub fn push(&self, item: T) {
        self.queue.lock().expect("never poisoned").push(item);
        let one: u64 = 1;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }

    /// Everything queued so far, in order.
    pub fn drain(&self) -> Vec<T> {
        let mut counter: u64 = 0;
        // SAFETY: an 8-byte read from our non-blocking eventfd (resets it).
        unsafe {
            libc::read(
                self.wake.as_raw_fd(),
                (&mut counter as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
        std::mem::take(&mut *self.queue.lock().expect("never poisoned"))
    }

    /// Blocks the thread for up to `wait`, or until something is pushed.
    fn block(&self, wait: Duration) {
        let mut fds = libc::pollfd {
            fd: self.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: ppoll on one valid pollfd with a valid timeout.
        unsafe {
            libc::ppoll(&mut fds, 1, &timeout, std::ptr::null());
        }
    }
}

/// Runs for the rest of the simulation: paces it to the real clock and hands everything the
/// inbox receives to `dispatch`, inside the simulation, at the simulated instant it arrived.
pub async fn pace<T>(inbox: std::sync::Arc<Inbox<T>>, mut dispatch: impl FnMut(T)) {
    let sim_start = madsim::time::Instant::now();
    let real_start_us = real_now_us();
    loop {
        let items = inbox.drain();
        if !items.is_empty() {
            for item in items {
                dispatch(item);
            }
            // Let the tasks that were handed something run at this same instant.
            madsim::task::yield_now().await;
            continue;
        }
        let sim_us = sim_start.elapsed().as_micros() as u64;
        let real_us = real_now_us() - real_start_us;
        if sim_us > real_us {
            inbox.block(Duration::from_micros(sim_us - real_us));
            continue;
        }
        madsim::time::sleep(Duration::from_millis(1)).await;
    }
}
