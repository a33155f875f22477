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

use std::io;
use std::sync::Arc;

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

impl ProxyThread {
    /// Start the thread (named `egress-proxy`) and its runtime (I/O and timers enabled).
    pub fn start() -> io::Result<ProxyThread> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("egress-proxy".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
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
            })?;
        let handle = rx
            .recv()
            .map_err(|_| io::Error::other("the egress proxy thread ended before it started"))??;
        Ok(ProxyThread {
            inner: Arc::new(Inner { handle, stop }),
        })
    }

    /// The runtime the proxy's tasks are spawned on.
    pub fn handle(&self) -> &Handle {
        &self.inner.handle
    }
}
