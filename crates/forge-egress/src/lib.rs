//! forge-egress: one egress policy and every place it is enforced.
//!
//! What it offers, and where each part lives:
//! - `policy.rs`: [`policy::EgressPolicy`] built from [`policy::EgressSettings`] (forge.yaml `egress`,
//!   skill `egress_domains`, `--allow`, model provider hosts); host entries, port rule, decisions
//!   ([`policy::Allowed`] or an [`EgressRefusal`]).
//! - `refusal.rs`: [`EgressRefusal`], why a request was refused (kind, host, rule), rendered to text
//!   once (`blocked by egress policy: ...`); the proxy's answers to other programs are read back
//!   into it there too.
//! - `target.rs`: [`target::Kind`] (plain HTTP or TLS: the default port) and
//!   [`target::ParsedUrl`] ([`target::parse_url`]), below both the policy and the client.
//! - `host.rs`: host normalisation (lowercase, trailing dot, IDN) and canonical-IP-only literals.
//! - `ip.rs`: the IP rule (always-blocked ranges, IPv6 forms embedding IPv4, private ranges).
//! - `inbound.rs`: the Host (loopback) and bearer-token rules forge's own A2A and MCP servers apply.
//! - `accept.rs`: the bounded accept loops: [`accept::accept_loop`] (connection cap, back-off,
//!   graceful stop; the proxy) and [`accept::accept_http`] (the A2A and MCP HTTP servers: a
//!   connection takes a request slot only once its head is in; until then it waits in a
//!   [`accept::HeadGate`] with its own budget, per-peer-IP cap and head timeout), and
//!   [`accept::serve_http1`] (header-read timeout, graceful shutdown), [`accept::bind`] (a listener
//!   with a flood-sized backlog).
//! - `probe.rs`: the probe listener (`--probe-port`: `/healthz`, `/readyz` on a port of their own).
//! - `resolve.rs`: the [`resolve::Resolver`] trait, [`resolve::SystemResolver`],
//!   [`resolve::StaticResolver`] (tests and `--resolve`).
//! - `connect.rs`: resolve once, validate every answer, dial only a validated address through an
//!   injectable [`connect::Dialer`].
//! - `proxy.rs`: [`proxy::EgressProxy`], the loopback HTTP/1.1 forward proxy (absolute-form http and
//!   CONNECT) with limits and an [`proxy::EgressObserver`] for audit events.
//! - `pool.rs`: the proxy's keep-alive pool of upstream connections, keyed by policy decision.
//! - `thread.rs`: [`thread::ProxyThread`], a thread with a single-threaded runtime of its own that a
//!   proxy can serve on (`forge egress serve`, `forge run`); optionally it polls the proxy's own
//!   sockets for a bounded time before it parks (`FORGE_PROXY_SPIN_US`, off by default).
//! - `confine.rs` (Linux; `confine_other.rs` elsewhere: always proxy-only): [`confine::install`] runs a child in a network namespace whose only
//!   reachable address is a listener forge's proxy serves ([`proxy::ProxyEntry`]); the probe and
//!   [`confine::availability`] (namespace or proxy-only, with the reason).
//! - `splice.rs` (Linux): zero-copy relay for CONNECT tunnels.
//! - `client.rs`: [`client::EgressClient`], the HTTP(S) client for tools and LLM providers: same
//!   policy and dialer, redirects followed and re-validated by the client, rustls with webpki roots.
//! - `error.rs`: [`error::EgressError`]; a refusal displays as `blocked by egress policy: ...`.

pub mod accept;
pub mod client;
#[cfg(target_os = "linux")]
pub mod confine;
#[cfg(not(target_os = "linux"))]
#[path = "confine_other.rs"]
pub mod confine;
// The non-Linux stand-in is compiled on Linux too (under test), so its API keeps up.
#[cfg(all(test, target_os = "linux"))]
#[allow(dead_code)]
#[path = "confine_other.rs"]
mod confine_other_check;
pub mod connect;
pub mod error;
pub mod host;
pub mod inbound;
pub mod ip;
pub mod policy;
mod pool;
pub mod probe;
pub mod proxy;
pub mod refusal;
pub mod resolve;
#[cfg(target_os = "linux")]
mod splice;
pub mod target;
pub mod thread;

pub use error::EgressError;
pub use policy::{EgressMode, EgressPolicy, EgressSettings};
pub use refusal::EgressRefusal;
