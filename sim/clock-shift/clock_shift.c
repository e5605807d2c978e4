/* A per-process clock for real redis-server and redis-sentinel (`locksim live --backend
 * redis-server`, `locksim fidelity`), loaded with LD_PRELOAD.
 *
 * libfaketime cannot be used: Debian's redis-server 7.0.15 is built with jemalloc, whose
 * initialisation reads the clock, and libfaketime's own initialisation allocates — it aborts
 * at start with "Unexpected recursive calls to clock_gettime()" under every setting tried
 * (FAKETIME_DONT_FAKE_MONOTONIC, FAKETIME_NO_CACHE, the MT variant, a start offset). This shim
 * never allocates: the real functions are found once with dlsym(RTLD_NEXT), a call made while
 * that lookup runs reads the clock by the raw system call, and the shift is read from a small
 * file mapped shared (LOCKSIM_CLOCK_FILE) that locksim rewrites (sim/src/live/clock_shift.rs).
 *
 * The file holds one record under a sequence lock (odd while being written):
 *   u64 seq; i64 wall_offset_ns; i64 mono_offset_ns; i64 wall_anchor_ns; i64 mono_anchor_ns;
 *   f64 rate
 * From the anchor on, a clock reads  true + offset + (rate - 1) * (true - anchor).
 * CLOCK_REALTIME, gettimeofday and time get the wall shift (a `clock_jump` steps it, a
 * `clock_drift` changes the rate); CLOCK_MONOTONIC only drifts (its offset is the drift so far),
 * as a stepped wall clock leaves the monotonic clock alone and a fast oscillator speeds up both.
 * Redis 7.0.15 reads the wall clock through gettimeofday (`ustime`, src/server.c 189-197) for
 * key expiry (`keyIsExpired`, src/db.c 1616-1650) and Sentinel's TILT check
 * (`sentinelCheckTiltCondition`, src/sentinel.c 5344-5354), and the monotonic clock through
 * clock_gettime(CLOCK_MONOTONIC) (src/monotonic.c 135-139; USE_PROCESSOR_CLOCK is off). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct shift {
    volatile uint64_t seq;
    volatile int64_t wall_offset_ns;
    volatile int64_t mono_offset_ns;
    volatile int64_t wall_anchor_ns;
    volatile int64_t mono_anchor_ns;
    volatile double rate;
};

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
/* 0: not looked up; 1: being looked up or mapped; 2: ready. */
static int state;
static const struct shift *mapped;

static int raw_clock_gettime(clockid_t clock, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, clock, ts);
}

static void init(void) {
    int expected = 0;
    if (!__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    const char *path = getenv("LOCKSIM_CLOCK_FILE");
    if (path != NULL) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            void *p = mmap(NULL, sizeof(struct shift), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (p != MAP_FAILED)
                mapped = p;
        }
    }
    __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
}

static int true_clock(clockid_t clock, struct timespec *ts) {
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2) {
        init();
        if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2)
            return raw_clock_gettime(clock, ts);
    }
    if (real_clock_gettime == NULL)
        return raw_clock_gettime(clock, ts);
    return real_clock_gettime(clock, ts);
}

/* The shift of `clock` at true time `true_ns`: 0 when there is no file or the writer is busy
 * for longer than a few tries. */
static int64_t shift_ns(int wall, int64_t true_ns) {
    if (mapped == NULL)
        return 0;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t before = __atomic_load_n(&mapped->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        int64_t offset = wall ? mapped->wall_offset_ns : mapped->mono_offset_ns;
        int64_t anchor = wall ? mapped->wall_anchor_ns : mapped->mono_anchor_ns;
        double rate = mapped->rate;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&mapped->seq, __ATOMIC_RELAXED) != before)
            continue;
        if (before == 0)
            return 0;
        return offset + (int64_t)((rate - 1.0) * (double)(true_ns - anchor));
    }
    return 0;
}

static void shifted(clockid_t clock, struct timespec *ts) {
    int wall = clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE;
    int mono = clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_COARSE ||
               clock == CLOCK_MONOTONIC_RAW || clock == CLOCK_BOOTTIME;
    if (!wall && !mono)
        return;
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
    ns += shift_ns(wall, ns);
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec -= 1;
    }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = true_clock(clock, ts);
    if (rc == 0)
        shifted(clock, ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    /* glibc declares `tv` non-null. */
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
