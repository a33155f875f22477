//! [`ProxyThread`]: a thread of its own, running a single-threaded tokio runtime, on which a proxy
//! serves its connections ([`crate::proxy::ProxyOptions::thread`]).
//!
//! Why: on a multi-threaded runtime a proxied request hops between workers (the client connection's
//! task, the upstream connection's task, the I/O driver), and each hop wakes a parked worker with a
//! futex call and a context switch; the host program's other work (an agent's A2A server, its
//! browser) queues in front of it too. On one thread of its own, a request's tasks wake each other
//! on that thread: measured in `cargo bench -p forge-cli --bench proxy_shipped`
//! (docs/benchmarks.md).
//!
//! Several proxies may share one thread (an agent's proxy and its per-task listeners). The thread
//! stops when the last [`ProxyThread`] clone is dropped (each running proxy holds one), dropping
//! whatever tasks are left on it.
//!
//! A bounded spin before parking (`FORGE_PROXY_SPIN_US`, 0-1000 µs, default [`DEFAULT_SPIN`]; 0
//! turns it off). With one client connection every request parks the thread twice (waiting for
//! the upstream's answer, then for the client's next request), and on an idle VM each wake of a
//! parked thread costs tens of µs. With a spin budget the thread, before it parks, first polls the
//! readiness of the proxy's own sockets (a second epoll set holding every client and upstream
//! socket, checked without blocking) for up to the budget, and parks only if nothing became ready.
//!
//! What keeps the spin from costing CPU where it buys nothing:
//! - **Back-off per kind of wait.** A wait for an upstream's answer (some request of this thread
//!   is waiting for one) and any other wait (a client's next request, a timer) each have their
//!   own back-off: a spin that runs out doubles it (1, 2, 4 ... up to 64 waits of that kind parked
//!   at once before the next spin); one that sees a socket ready clears it. A slow upstream (the
//!   public internet: milliseconds) or a client that pauses between requests (an agent thinking)
//!   costs one budget now and then, not one per request; an idle proxy spins about once per 64
//!   timer wakes.
//! - **Only with a CPU to spare** ([`ProxyThread::start`]): every 20 ms the thread reads the
//!   number of runnable threads (`/proc/loadavg`) and spins only while it is at most the number
//!   of CPUs this process may use. On a busy machine a spinning thread takes CPU from the threads
//!   it waits for and is preempted anyway.
//!
//! A cross-thread wake (a task spawned from another thread, a policy narrowed) or a due timer
//! waits at most the budget. Measured in `cargo bench -p forge-cli --bench proxy_shipped`
//! (docs/benchmarks.md).

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// A thread with a single-threaded tokio runtime for proxies. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct ProxyThread {
    inner: Arc<Inner>,
}

struct Inner {
    handle: Handle,
    stop: CancellationToken,
    spins: Arc<SpinCounts>,
}

/// How the thread's spins before parking ended (all zero without a spin budget).
#[derive(Debug, Default)]
struct SpinCounts {
    /// Spins that saw a socket of the proxy become ready (the thread did not sleep).
    ready: AtomicU64,
    /// Spins that used up their budget (the thread then parked as usual).
    expired: AtomicU64,
    /// Waits parked at once because recent spins of their kind ran out (the back-off).
    skipped: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for ProxyThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyThread")
    }
}

/// The environment variable with the spin budget in µs (see the module comment).
pub const SPIN_ENV: &str = "FORGE_PROXY_SPIN_US";

/// The largest spin budget honoured.
const MAX_SPIN: Duration = Duration::from_millis(1);

/// The spin budget when `FORGE_PROXY_SPIN_US` is unset.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(100);

/// The most waits of one kind parked at once after spins of that kind ran out, before the next.
const MAX_BACKOFF: u32 = 64;

/// The spin budget `FORGE_PROXY_SPIN_US` asks for: [`DEFAULT_SPIN`] when unset, empty or not a
/// number of µs; 0 is off; at most [`MAX_SPIN`].
fn spin_from_env() -> Duration {
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_SPIN, |us| Duration::from_micros(us).min(MAX_SPIN))
}

thread_local! {
    /// On a proxy thread with a spin budget: the epoll set of the proxy's sockets.
    static SPIN_SET: Cell<Option<RawFd>> = const { Cell::new(None) };
    /// On a proxy thread with a spin budget: requests waiting for their upstream's answer.
    static AWAITING: Cell<u32> = const { Cell::new(0) };
    /// Per kind of wait (0: other, 1: an upstream's answer): waits still to park at once, and the
    /// back-off the last spin that ran out set.
    static BACKOFF: Cell<[(u32, u32); 2]> = const { Cell::new([(0, 0); 2]) };
}

/// Marks a request as waiting for its upstream's answer while it lives (see the module comment):
/// the thread's parks meanwhile are upstream waits, with their own back-off. Outside a spinning
/// proxy thread it does nothing.
pub(crate) struct AwaitingUpstream {
    counted: bool,
}

/// Start a wait for an upstream's answer (end it by dropping the value).
pub(crate) fn awaiting_upstream() -> AwaitingUpstream {
    let counted = SPIN_SET.with(Cell::get).is_some();
    if counted {
        AWAITING.with(|a| a.set(a.get().saturating_add(1)));
    }
    AwaitingUpstream { counted }
}

impl Drop for AwaitingUpstream {
    fn drop(&mut self) {
        // A spinning proxy thread runs a current-thread runtime, so the task holding this value
        // (and this drop) runs on the thread that counted it.
        if self.counted {
            AWAITING.with(|a| a.set(a.get().saturating_sub(1)));
        }
    }
}

/// The park hook of a spinning proxy thread: spin when the back-off of this kind of wait (for an
/// upstream's answer, or any other) allows it and, with `when_idle`, the machine has a CPU to
/// spare.
#[cfg(target_os = "linux")]
fn before_park(set: RawFd, budget: Duration, counts: &SpinCounts, when_idle: bool) {
    let kind = usize::from(AWAITING.with(Cell::get) > 0);
    let (skip, backoff) = BACKOFF.with(|b| b.get()[kind]);
    let set_backoff = |v: (u32, u32)| {
        BACKOFF.with(|b| {
            let mut all = b.get();
            all[kind] = v;
            b.set(all);
        })
    };
    if skip > 0 {
        set_backoff((skip - 1, backoff));
        counts.skipped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if when_idle && !cpu_to_spare() {
        return;
    }
    if spin_until_ready(set, budget, counts) {
        set_backoff((0, 0));
    } else {
        let next = (backoff.saturating_mul(2)).clamp(1, MAX_BACKOFF);
        set_backoff((next, next));
    }
}

/// How often the spinning thread looks at the machine's load.
const LOAD_SAMPLE: Duration = Duration::from_millis(20);

thread_local! {
    /// When the load was last read, and whether a CPU was to spare then.
    static SPARE: Cell<Option<(Instant, bool)>> = const { Cell::new(None) };
    /// The CPUs this process may use, read once per thread (std reads the affinity mask and the
    /// cgroup's quota files for it).
    static CPUS: usize = std::thread::available_parallelism().map_or(1, |n| n.get());
}

/// Whether the machine has a CPU to spare for a spin (read at most every [`LOAD_SAMPLE`]): the
/// runnable threads (this one included) are at most the CPUs this process may use. Without
/// `/proc/loadavg`, yes (the back-off still bounds the cost).
#[cfg(target_os = "linux")]
fn cpu_to_spare() -> bool {
    let now = Instant::now();
    if let Some((at, spare)) = SPARE.with(Cell::get) {
        if now.duration_since(at) < LOAD_SAMPLE {
            return spare;
        }
    }
    let cpus = CPUS.with(|c| *c);
    let spare = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| runnable_of_loadavg(&l))
        .is_none_or(|running| running <= cpus);
    SPARE.with(|s| s.set(Some((now, spare))));
    spare
}

/// The runnable threads in a `/proc/loadavg` line (`0.52 0.58 0.59 3/467 12345`: the 3).
fn runnable_of_loadavg(line: &str) -> Option<usize> {
    line.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .0
        .parse()
        .ok()
}

/// Add a socket of the proxy to the spin set of the proxy thread this runs on (nothing elsewhere,
/// or without a spin budget). The kernel drops it from the set when the socket is closed.
#[cfg(target_os = "linux")]
pub(crate) fn watch_for_spin(sock: &impl AsRawFd) {
    let Some(set) = SPIN_SET.with(Cell::get) else {
        return;
    };
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
        u64: 0,
    };
    // SAFETY: both descriptors are open (the set lives as long as the thread, the socket is
    // borrowed) and `ev` is a valid epoll_event. A failure only means no early end of a spin.
    unsafe {
        libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, sock.as_raw_fd(), &mut ev);
    }
}

/// Elsewhere there is no spin set.
#[cfg(not(target_os = "linux"))]
pub(crate) fn watch_for_spin(_sock: &impl AsRawFd) {}

/// Poll `set` without blocking until one of its sockets is readable (true) or `budget` has
/// passed (false).
#[cfg(target_os = "linux")]
fn spin_until_ready(set: RawFd, budget: Duration, counts: &SpinCounts) -> bool {
    let end = Instant::now() + budget;
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }];
    // Bounded by `budget` (at most MAX_SPIN).
    loop {
        // SAFETY: `set` is an open epoll descriptor and `ev` a writable array of one event.
        let n = unsafe { libc::epoll_wait(set, ev.as_mut_ptr(), 1, 0) };
        if n != 0 {
            counts.ready.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        if Instant::now() >= end {
            counts.expired.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        std::hint::spin_loop();
    }
}

impl ProxyThread {
    /// Start the thread (named `egress-proxy`) and its runtime (I/O and timers enabled), with the
    /// spin budget of `FORGE_PROXY_SPIN_US` (default [`DEFAULT_SPIN`]), spinning only while the
    /// machine has a CPU to spare.
    pub fn start() -> io::Result<ProxyThread> {
        Self::start_spinning(spin_from_env(), true)
    }

    /// The same with a spin budget of `spin` (zero: always park at once, as tokio does), spinning
    /// whatever the machine's load (the back-off still applies): for tests and measurements.
    pub fn start_with_spin(spin: Duration) -> io::Result<ProxyThread> {
        Self::start_spinning(spin, false)
    }

    fn start_spinning(spin: Duration, when_idle: bool) -> io::Result<ProxyThread> {
        let spin = spin.min(MAX_SPIN);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let spins = Arc::new(SpinCounts::default());
        let counts = spins.clone();
        std::thread::Builder::new()
            .name("egress-proxy".into())
            .spawn(move || {
                let mut builder = tokio::runtime::Builder::new_current_thread();
                builder.enable_all();
                // The spin set lives as long as this thread (dropped when it returns).
                let set = (!spin.is_zero()).then(spin_set).flatten();
                #[cfg(target_os = "linux")]
                if let Some(set) = &set {
                    let fd = set.as_raw_fd();
                    SPIN_SET.with(|s| s.set(Some(fd)));
                    builder.on_thread_park(move || before_park(fd, spin, &counts, when_idle));
                }
                let rt = match builder.build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if tx.send(Ok(rt.handle().clone())).is_err() {
                    return;
                }
                // Spawned tasks run while this waits; after it, dropping `rt` (here, outside any
                // async context) drops the tasks left.
                rt.block_on(stopped.cancelled());
                drop(rt);
                SPIN_SET.with(|s| s.set(None));
                drop(set);
            })?;
        let handle = rx
            .recv()
            .map_err(|_| io::Error::other("the egress proxy thread ended before it started"))??;
        Ok(ProxyThread {
            inner: Arc::new(Inner {
                handle,
                stop,
                spins,
            }),
        })
    }

    /// How many spins before parking ended because a socket of the proxy became ready, and how
    /// many used up their budget (both 0 without a spin budget).
    pub fn spin_counts(&self) -> (u64, u64) {
        let c = &self.inner.spins;
        (
            c.ready.load(Ordering::Relaxed),
            c.expired.load(Ordering::Relaxed),
        )
    }

    /// How many waits parked without a spin because recent spins of their kind had run out.
    pub fn spins_skipped(&self) -> u64 {
        self.inner.spins.skipped.load(Ordering::Relaxed)
    }

    /// The runtime the proxy's tasks are spawned on.
    pub fn handle(&self) -> &Handle {
        &self.inner.handle
    }
}

/// A new epoll set for the spin, or none if the kernel refuses one (then the thread parks at once).
#[cfg(target_os = "linux")]
fn spin_set() -> Option<OwnedFd> {
    // SAFETY: no pointers are passed; a non-negative result is a new descriptor owned by nobody.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Elsewhere: no spin (the thread parks at once).
#[cfg(not(target_os = "linux"))]
fn spin_set() -> Option<OwnedFd> {
    None
}

#[cfg(test)]
mod tests {
    use super::runnable_of_loadavg;

    #[test]
    fn the_runnable_count_is_read_from_loadavg() {
        assert_eq!(runnable_of_loadavg("0.52 0.58 0.59 3/467 12345\n"), Some(3));
        assert_eq!(runnable_of_loadavg("7.10 6.00 5.00 12/900 1"), Some(12));
        assert_eq!(runnable_of_loadavg("0.52 0.58 0.59"), None);
        assert_eq!(runnable_of_loadavg("0.52 0.58 0.59 x/467 1"), None);
    }
}
