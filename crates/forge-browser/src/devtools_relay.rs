//! Chromium in a network namespace of its own (forge-egress `confine`), and forge's way to its
//! DevTools endpoint, which then lives inside that namespace.
//!
//! - Chromium is spawned confined with [`PLAN`]: the proxy listener 127.0.0.1:3128 (its
//!   `--proxy-server` and every browser context's proxy), spare listeners 3129.. that forge can
//!   serve later (per-context proxies: [`SpareProxies`]), and [`DIAL_SOCKETS`] unconnected TCP
//!   sockets made inside the namespace.
//! - Chromium's `--remote-debugging-port=0` binds 127.0.0.1 inside the namespace: nothing outside
//!   it, no other local user, can reach it. forge reaches it by connecting one of the dial
//!   sockets (the connect happens in the socket's namespace) through the relay below.
//! - The relay listens on forge's 127.0.0.1 (an ephemeral port) because chromiumoxide connects
//!   with a websocket URL. It forwards only a `GET /devtools/browser/<guid>` websocket upgrade
//!   naming the exact guid Chromium printed (a secret only forge read, from Chromium's stderr);
//!   anything else gets 403 and is closed. Each forwarded connection uses one dial socket: a
//!   browser needs two (forge's CDP connection and the frames' connection, `frames.rs`); past
//!   [`DIAL_SOCKETS`] the relay answers 503.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use forge_egress::confine::{self, ConfinedChild, Confiner, Plan};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Unconnected sockets made in Chromium's namespace for forge's DevTools connections.
pub const DIAL_SOCKETS: usize = 8;
/// Spare proxy listeners in Chromium's namespace (3129..), for per-context proxies: a session
/// with a proxy of its own (a task's narrowed policy) takes one while it lives
/// ([`crate::BrowserManager::namespace_slot`]), so this bounds the scoped sessions open at once.
pub const SPARE_PROXIES: u16 = 32;
/// Largest request head the relay reads.
const MAX_HEAD: usize = 16 * 1024;
/// Time a client has to send its request head to the relay.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// What Chromium's namespace gets.
fn plan() -> Plan {
    let mut ports = vec![confine::CHILD_PROXY_PORT];
    ports.extend((1..=SPARE_PROXIES).map(|i| confine::CHILD_PROXY_PORT + i));
    Plan {
        listen_ports: ports,
        dial_sockets: DIAL_SOCKETS,
    }
}

/// The proxy address Chromium and its contexts use inside the namespace.
pub fn inside_proxy() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, confine::CHILD_PROXY_PORT))
}

/// Spawn `cmd` confined by `confiner` (through the lifeline, `lifeline.rs`); the confined
/// child's handle keeps the proxy serving Chromium's 127.0.0.1:3128 while it lives.
pub(crate) async fn spawn_confined(
    mut cmd: tokio::process::Command,
    confiner: &Confiner,
) -> Result<(tokio::process::Child, ConfinedChild), String> {
    let pending = confiner
        .prepare(cmd.as_std_mut(), &plan())
        .map_err(|e| e.to_string())?;
    let child = match crate::lifeline::spawn(cmd).await {
        Ok(c) => c,
        Err(e) => {
            return Err(format!(
                "cannot execute it confined: {}",
                pending.failure(e)
            ))
        }
    };
    match pending.attach() {
        Ok(c) => Ok((child, c)),
        // `child` is dropped with kill_on_drop; the caller's cleanup removes the rest.
        Err(e) => Err(e.to_string()),
    }
}

/// The spare proxy listeners of Chromium's namespace, handed out one at a time.
pub struct SpareProxies {
    child: StdMutex<ConfinedChild>,
}

impl SpareProxies {
    pub(crate) fn new(child: ConfinedChild) -> Self {
        SpareProxies {
            child: StdMutex::new(child),
        }
    }

    /// Serve one more listener inside Chromium's namespace with the proxy (its policy, for now)
    /// and return its address there; `None` when all are in use.
    pub fn serve_one(&self) -> Result<Option<SocketAddr>, String> {
        let mut c = self.child.lock().unwrap_or_else(|p| p.into_inner());
        Ok(c.serve_spare()
            .map_err(|e| e.to_string())?
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port))))
    }

    /// Take a spare listener to serve with a policy of the caller's (a session's own proxy);
    /// it goes back to the spares when the slot is dropped. `None` when all are taken.
    pub(crate) fn take(self: &Arc<Self>) -> Option<NamespaceSlot> {
        let (port, listener) = self
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .spare
            .pop()?;
        Some(NamespaceSlot {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            port,
            listener: Some(listener),
            home: Arc::downgrade(self),
        })
    }

    /// Take the dial sockets (for the relay).
    pub(crate) fn take_dial(&self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.child.lock().unwrap_or_else(|p| p.into_inner()).dial)
    }
}

/// A proxy listener inside Chromium's network namespace, lent to one session: serve
/// [`NamespaceSlot::listener`] with the session's policy and create its browser context with
/// [`NamespaceSlot::addr`]. Dropped, the listener returns to the spares of the Chromium it came
/// from (a later session may take it); the serving that the caller started must be stopped first.
pub struct NamespaceSlot {
    /// The listener's address inside the namespace (what the browser context is told).
    pub addr: SocketAddr,
    port: u16,
    listener: Option<std::net::TcpListener>,
    home: std::sync::Weak<SpareProxies>,
}

impl NamespaceSlot {
    /// A handle on the listener to serve (a duplicate: the slot keeps its own to give back).
    pub fn listener(&self) -> std::io::Result<std::net::TcpListener> {
        match &self.listener {
            Some(l) => l.try_clone(),
            None => Err(std::io::Error::other("the namespace slot was given back")),
        }
    }
}

impl Drop for NamespaceSlot {
    fn drop(&mut self) {
        // Back to the spares while that Chromium lives; with it gone the listener just closes.
        if let (Some(home), Some(l)) = (self.home.upgrade(), self.listener.take()) {
            home.child
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .spare
                .push((self.port, l));
        }
    }
}

/// Start the relay for the DevTools URL Chromium printed (`ws://127.0.0.1:PORT/devtools/browser/
/// GUID`, an address inside its namespace). Returns the URL forge connects to and the relay task.
pub(crate) async fn start(
    inside_ws: &str,
    dial: Vec<OwnedFd>,
) -> Result<(String, tokio::task::JoinHandle<()>), String> {
    let url = url::Url::parse(inside_ws)
        .map_err(|e| format!("unexpected DevTools address {inside_ws:?}: {e}"))?;
    let port = url
        .port()
        .ok_or_else(|| format!("DevTools address {inside_ws:?} has no port"))?;
    let inside_path = url.path().to_string();
    // Lightpanda serves CDP on `/`, with no secret in the path: the relay then makes one up
    // (forge alone knows it) and forwards the upgrade to `/`.
    let path = if inside_path == "/" {
        use rand::Rng;
        let secret: u128 = rand::rng().random();
        format!("/devtools/browser/{secret:032x}")
    } else {
        inside_path.clone()
    };
    let guid = path.strip_prefix("/devtools/browser/").unwrap_or("");
    if guid.is_empty() || !guid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(format!("unexpected DevTools path in {inside_ws:?}"));
    }
    let inside_line = format!("GET {inside_path} HTTP/1.1");
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|e| format!("cannot bind the DevTools relay on 127.0.0.1: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("DevTools relay: {e}"))?;
    let pool = Arc::new(StdMutex::new(dial));
    let expected = format!("GET {path} HTTP/1.1");
    let task = tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let pool = pool.clone();
            let expected = expected.clone();
            let inside_line = inside_line.clone();
            tokio::spawn(async move {
                if let Err(e) = relay_one(sock, &expected, &inside_line, port, &pool).await {
                    tracing::debug!("DevTools relay: {e}");
                }
            });
        }
    });
    Ok((format!("ws://{addr}{path}"), task))
}

async fn relay_one(
    mut client: tokio::net::TcpStream,
    expected: &str,
    inside_line: &str,
    port: u16,
    pool: &StdMutex<Vec<OwnedFd>>,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(h)) => h,
        _ => return Ok(()),
    };
    if !is_browser_upgrade(&head, expected) {
        client
            .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await?;
        return Ok(());
    }
    let sock = pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let Some(sock) = sock else {
        client
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await?;
        return Ok(());
    };
    let mut upstream = confine::connect_inside(sock, port).await?;
    // CDP is small messages both ways, each awaited: Nagle would hold a message's tail for the
    // peer's delayed ACK (about 40 ms; `nodelay.rs`).
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    // The request line forge's client sent is `expected`; the engine gets its own path.
    let rest = &head[expected.len()..];
    upstream.write_all(inside_line.as_bytes()).await?;
    upstream.write_all(rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Read up to the end of the request head (and whatever came with it), at most [`MAX_HEAD`].
async fn read_head(s: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while buf.len() < MAX_HEAD {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(buf);
        }
    }
    Err(std::io::Error::other("no complete request head"))
}

/// The head is exactly `GET /devtools/browser/<guid> HTTP/1.1` with `Upgrade: websocket`.
fn is_browser_upgrade(head: &[u8], expected: &str) -> bool {
    let Ok(text) = std::str::from_utf8(head) else {
        return false;
    };
    let mut lines = text.split("\r\n");
    if lines.next() != Some(expected) {
        return false;
    }
    lines.take_while(|l| !l.is_empty()).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("upgrade") && v.trim().eq_ignore_ascii_case("websocket")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_browser_upgrade_with_the_exact_guid_passes() {
        let want = "GET /devtools/browser/ab-12 HTTP/1.1";
        let ok = b"GET /devtools/browser/ab-12 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
        assert!(is_browser_upgrade(ok, want));
        for bad in [
            &b"GET /devtools/browser/ab-13 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"[..],
            b"GET /json/version HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET /devtools/page/ab-12 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET /devtools/browser/ab-12 HTTP/1.1\r\nHost: x\r\n\r\n",
            b"POST /devtools/browser/ab-12 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET /devtools/browser/ab-12 HTTP/1.1\r\n\r\nUpgrade: websocket\r\n\r\n",
        ] {
            assert!(
                !is_browser_upgrade(bad, want),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
