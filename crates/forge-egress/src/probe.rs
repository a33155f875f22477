//! The probe listener of `forge run` and `forge mcp serve --transport http` (`--probe-port`):
//! `GET /healthz` (liveness: the process answers) and `GET /readyz` (readiness, from the
//! server's own check) on a port of their own, so a flood of connections on the main port never
//! reaches the probes Kubernetes uses to restart or route to the pod. Nothing else is served;
//! the port is meant for the kubelet, not for clients (the manifests `forge build` writes keep it
//! out of the Service).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::accept::{accept_http, serve_http1, AcceptOptions, HeadGate, OverCap, BUSY_503};

/// Probe connections served at once.
pub const PROBE_CONNECTIONS: usize = 64;

/// The readiness check behind `/readyz`: `Ok` when ready, else why not.
pub type ReadyCheck =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// A readiness check that is always ready.
pub fn always_ready() -> ReadyCheck {
    Arc::new(|| Box::pin(async { Ok(()) }))
}

fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

async fn answer(ready: ReadyCheck, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/healthz") => {
            json(StatusCode::OK, r#"{"status":"ok"}"#.into())
        }
        (&Method::GET | &Method::HEAD, "/readyz") => match ready().await {
            Ok(()) => json(StatusCode::OK, r#"{"status":"ready"}"#.into()),
            Err(why) => json(StatusCode::SERVICE_UNAVAILABLE, not_ready_json(&why)),
        },
        _ => json(
            StatusCode::NOT_FOUND,
            r#"{"error":"the probe port serves GET /healthz and GET /readyz only"}"#.into(),
        ),
    }
}

/// `{"status":"not ready","reason":"..."}` with the reason escaped as a JSON string.
fn not_ready_json(reason: &str) -> String {
    let mut out = String::from(r#"{"status":"not ready","reason":""#);
    for c in reason.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push_str("\"}");
    out
}

/// Serve the probes on `listener` until `stop` is cancelled (spawn the returned future).
pub fn serve(
    listener: TcpListener,
    ready: ReadyCheck,
    stop: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let options = AcceptOptions {
        log_prefix: "probe:",
        conns: Arc::new(Semaphore::new(PROBE_CONNECTIONS)),
        over_cap: OverCap::Answer(BUSY_503),
        nodelay: true,
        tracker: None,
    };
    let gate = HeadGate::new(1024, 1024, Duration::from_secs(5));
    let serving_stop = stop.clone();
    accept_http(listener, options, gate, stop, move |conn| {
        let ready = ready.clone();
        let svc = service_fn(move |req| {
            let ready = ready.clone();
            async move { Ok::<_, Infallible>(answer(ready, req).await) }
        });
        serve_http1(
            conn,
            svc,
            Duration::from_secs(5),
            serving_stop.clone(),
            Duration::from_secs(1),
        )
    })
}
