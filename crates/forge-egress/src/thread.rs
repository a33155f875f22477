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
//! Optional bounded spin before parking (`FORGE_PROXY_SPIN_US`, 0-1000 µs, default 0: off). With
//! one client connection every request parks the thread twice (waiting for the client, waiting for
//! the upstream), and on an idle VM each wake of a parked thread costs tens of µs. With a spin
//! budget, the thread first polls the readiness of the proxy's own sockets (a second epoll set
//! holding every client and upstream socket, checked without blocking) for up to that long, and
//! parks only if nothing became ready. A cross-thread wake (a task spawned from another thread, a
//! policy narrowed) or a due timer waits at most the budget. Measured in
//! `cargo bench -p forge-cli --bench proxy_shipped` (docs/benchmarks.md); off by default because
//! it spends CPU to save latency.

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

/// The spin budget `FORGE_PROXY_SPIN_US` asks for: 0 (off) when unset, empty or not a number of
/// µs; at most [`MAX_SPIN`].
fn spin_from_env() -> Duration {
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, |us| Duration::from_micros(us).min(MAX_SPIN))
}

thread_local! {
    /// On a proxy thread with a spin budget: the epoll set of the proxy's sockets.
    static SPIN_SET: Cell<Option<RawFd>> = const { Cell::new(None) };
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

/// Poll `set` without blocking until one of its sockets is readable or `budget` has passed.
#[cfg(target_os = "linux")]
fn spin_until_ready(set: RawFd, budget: Duration, counts: &SpinCounts) {
    let end = Instant::now() + budget;
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }];
    // Bounded by `budget` (at most MAX_SPIN).
    loop {
        // SAFETY: `set` is an open epoll descriptor and `ev` a writable array of one event.
        let n = unsafe { libc::epoll_wait(set, ev.as_mut_ptr(), 1, 0) };
        if n != 0 {
            counts.ready.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if Instant::now() >= end {
            counts.expired.fetch_add(1, Ordering::Relaxed);
            return;
        }
        std::hint::spin_loop();
    }
}

impl ProxyThread {
    /// Start the thread (named `egress-proxy`) and its runtime (I/O and timers enabled), with the
    /// spin budget of `FORGE_PROXY_SPIN_US` (default: none).
    pub fn start() -> io::Result<ProxyThread> {
        Self::start_with_spin(spin_from_env())
    }

    /// The same with a spin budget of `spin` (zero: park at once, as tokio does).
    pub fn start_with_spin(spin: Duration) -> io::Result<ProxyThread> {
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
                    builder.on_thread_park(move || spin_until_ready(fd, spin, &counts));
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
