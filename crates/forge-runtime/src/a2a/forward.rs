//! Forwarding a message to the replica that holds its context's live browser (issue 14).
//!
//! A live browser context (logged-in page, open tabs) belongs to one replica of a fleet. When a
//! message for that context reaches another replica, that replica sends the JSON-RPC request on,
//! unchanged, to the owner's address from the state store (`FORGE_REPLICA_URL`), with the shared
//! bearer token, and relays the answer (a JSON reply or an SSE stream) back byte for byte.
//!
//! Invariants:
//! - One hop: a forwarded request carries [`FORWARDED_HEADER`] and is never forwarded again, so
//!   two replicas that disagree about an owner cannot bounce a message between them.
//! - Peers are infrastructure, not agent egress: the owner's address comes from the store (written
//!   by the owner itself), never from the request, so a caller cannot make a replica connect to a
//!   place of its choosing.
//! - Nothing hangs: the connection and the answer's head each have a time limit; on failure the
//!   caller runs the task itself in a new browser session and says so.

use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// Header that marks a request forwarded by another replica (its value: that replica's id).
pub(crate) const FORWARDED_HEADER: &str = "x-forge-forwarded-by";

/// Time to connect to the owner replica.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the owner to answer with its response head (a blocking `message/send` answers only
/// when its task ends, so this is the task time limit, not a short one).
const HEAD_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Send `body` (a JSON-RPC request) to the replica at `address` (`http://host:port/`) and return
/// its response. `token` is the bearer token the fleet shares; `from` this replica's id; `host`
/// the client's `Host` (so the owner builds URIs the client can use), else the owner's address.
pub(crate) async fn forward(
    address: &str,
    token: Option<&str>,
    from: &str,
    host: Option<&str>,
    body: Bytes,
) -> Result<Response<Incoming>, String> {
    let url = url::Url::parse(address).map_err(|e| format!("replica address {address}: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "replica address {address}: only http:// is supported between replicas"
        ));
    }
    let peer = url
        .host_str()
        .ok_or_else(|| format!("replica address {address} has no host"))?
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let authority = match url.port() {
        Some(p) => format!("{peer}:{p}"),
        None => peer.clone(),
    };
    let dial = peer
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let stream = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((dial.as_str(), port)),
    )
    .await
    .map_err(|_| {
        format!("replica {address} did not accept a connection within {CONNECT_TIMEOUT:?}")
    })?
    .map_err(|e| format!("replica {address}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("replica {address}: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("forwarding connection ended: {e}");
        }
    });
    let mut req = Request::post(url.path())
        .header(header::HOST, host.unwrap_or(&authority))
        .header(header::CONTENT_TYPE, "application/json")
        .header(FORWARDED_HEADER, from);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Full::new(body))
        .map_err(|e| format!("forwarding request: {e}"))?;
    tokio::time::timeout(HEAD_TIMEOUT, sender.send_request(req))
        .await
        .map_err(|_| format!("replica {address} did not answer within {HEAD_TIMEOUT:?}"))?
        .map_err(|e| format!("replica {address}: {e}"))
}
