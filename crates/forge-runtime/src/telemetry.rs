//! OpenTelemetry traces over OTLP/HTTP (protobuf): one span per task, model call, tool call and
//! egress decision, all in the task's trace; an A2A request with a W3C `traceparent` continues
//! its caller's trace. See docs/observability.md for the variables, span names and attributes.
//!
//! - Off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
//!   (and `OTEL_SDK_DISABLED` is not `true`, `OTEL_TRACES_EXPORTER` not `none`). Off costs
//!   nothing: no exporter, no batch thread, and every hook below returns after one load of an
//!   empty [`OnceLock`] (a [`Trace`] is then `None` inside).
//! - The exporter's traffic goes through forge-egress's client ([`EgressClient`]) on a policy of
//!   its own that allows exactly the collector's `host:port` (so the resolve-and-dial rules hold
//!   for it too) and follows no redirect. A collector on this machine (loopback) is allowed as
//!   configured; any other needs `FORGE_OTEL_ALLOW_REMOTE=1`, because spans carry hosts, tool
//!   names and task ids out of the machine. The collector is never added to the agent's policy:
//!   the agent's tools cannot reach it.
//! - Spans are built after the fact from what the loop already measures (explicit start and end
//!   times), so the loop's hot path gains no locks; a span never carries tool arguments, prompts,
//!   outputs or secrets, only names, sizes, outcomes and durations (what the audit log carries).
//! - The process has one tracer provider ([`init`] once; a second call is a no-op), flushed by
//!   [`shutdown`] (`Runner::shutdown`: `forge run` on a signal or after `--once`).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::policy::{EgressMode, EgressSettings};
use forge_egress::proxy::{Decision, Outcome};
use forge_egress::EgressPolicy;

/// The variable that lets traces go to a collector that is not on this machine.
pub const ALLOW_REMOTE_VAR: &str = "FORGE_OTEL_ALLOW_REMOTE";

/// How long one export may take (the client's whole-request limit).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`shutdown`] waits for the last spans to leave.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Why tracing could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL with a host.
    #[error("{var}={value:?}: {why}; set it to the collector's OTLP/HTTP URL, e.g. http://127.0.0.1:4318")]
    BadEndpoint {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// The collector is not on this machine and `FORGE_OTEL_ALLOW_REMOTE` is not `1`.
    #[error("{var}={value:?}: the collector {host} is not on this machine, and spans (hosts, tool names, task ids) would leave it; set {ALLOW_REMOTE_VAR}=1 to send them there (see docs/observability.md)")]
    RemoteNotAllowed {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The collector's host.
        host: String,
    },
    /// A protocol other than `http/protobuf` was asked for.
    #[error("{var}={value:?}: forge exports traces over http/protobuf only; unset it or set it to http/protobuf")]
    Protocol {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The exporter or its client could not be built.
    #[error("the OTLP trace exporter could not be set up: {0}")]
    Exporter(String),
}

/// Where traces go, read from the standard OpenTelemetry variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The full URL spans are posted to (`.../v1/traces`).
    pub url: String,
    /// The policy entry for it (`host:port`).
    pub entry: String,
    /// The collector is not on loopback.
    pub remote: bool,
    /// `service.name`: `OTEL_SERVICE_NAME`, else the agent id.
    pub service: String,
}

/// Read the endpoint from `env`; `Ok(None)` when tracing is off.
pub(crate) fn endpoint_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    agent_id: &str,
) -> Result<Option<Endpoint>, TelemetryError> {
    let set = |k: &str| {
        env(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return Ok(None);
    }
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(value) = set(var) {
            if value != "http/protobuf" {
                return Err(TelemetryError::Protocol { var, value });
            }
            break;
        }
    }
    // The per-signal variable is used as is; the general one gets the signal path appended.
    let (var, value, url) = if let Some(v) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v.clone(), v)
    } else if let Some(v) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
        let url = format!("{}/v1/traces", v.trim_end_matches('/'));
        ("OTEL_EXPORTER_OTLP_ENDPOINT", v, url)
    } else {
        return Ok(None);
    };
    let bad = |why: &str| TelemetryError::BadEndpoint {
        var,
        value: value.clone(),
        why: why.to_string(),
    };
    let parsed = url::Url::parse(&url).map_err(|e| bad(&format!("not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
        None => return Err(bad("it names no host")),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "credentials in the URL are not accepted; use OTEL_EXPORTER_OTLP_HEADERS",
        ));
    }
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| bad("it has no port"))?;
    let remote = !is_loopback_host(&host);
    if remote && set(ALLOW_REMOTE_VAR).as_deref() != Some("1") {
        return Err(TelemetryError::RemoteNotAllowed { var, value, host });
    }
    Ok(Some(Endpoint {
        url,
        entry: format!("{host}:{port}"),
        remote,
        service: set("OTEL_SERVICE_NAME").unwrap_or_else(|| agent_id.to_string()),
    }))
}

/// `localhost` or a loopback address (`127.0.0.0/8`, `[::1]`).
fn is_loopback_host(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The installed provider and its tracer.
struct Installed {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    agent: String,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

fn installed() -> Option<&'static Installed> {
    INSTALLED.get()
}

/// Whether traces are exported.
pub(crate) fn enabled() -> bool {
    installed().is_some()
}

/// Start exporting traces when the environment asks for it (see the module docs). Must run
/// inside a Tokio runtime (the exporter's requests run on it). Returns whether tracing is on.
pub(crate) fn init(
    env: &dyn Fn(&str) -> Option<String>,
    agent_id: &str,
) -> Result<bool, TelemetryError> {
    if enabled() {
        return Ok(true);
    }
    let Some(ep) = endpoint_from_env(env, agent_id)? else {
        return Ok(false);
    };
    let rt = tokio::runtime::Handle::try_current()
        .map_err(|_| TelemetryError::Exporter("no async runtime to send spans on".into()))?;
    let policy = EgressPolicy::new(EgressSettings {
        mode: Some(EgressMode::Allowlist),
        // A remote collector on a private address (a cluster service) is the usual case.
        allow_private_ips: ep.remote,
        forge_entries: vec![("OpenTelemetry collector".into(), ep.entry.clone())],
        ..Default::default()
    })
    .map_err(|e| TelemetryError::Exporter(format!("collector {}: {e}", ep.entry)))?;
    let client = EgressClient::new(
        Arc::new(policy),
        ClientOptions {
            max_redirects: 0,
            max_body_bytes: 1024 * 1024,
            timeout: EXPORT_TIMEOUT,
            ..Default::default()
        },
    );
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(EgressHttp {
            client: Arc::new(client),
            rt,
        })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(ep.url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let resource = Resource::builder_empty()
        .with_service_name(ep.service.clone())
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("forge.agent", agent_id.to_string()),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("forge");
    let fresh = Installed {
        provider,
        tracer,
        agent: agent_id.to_string(),
    };
    if let Err(lost) = INSTALLED.set(fresh) {
        // Another runner in this process won the race: stop the spare provider.
        let _ = lost.provider.shutdown();
    }
    tracing::info!(endpoint = %ep.url, "exporting traces over OTLP/HTTP");
    Ok(true)
}

/// Flush the spans not yet sent and stop the exporter (at most a few seconds). A no-op when
/// tracing is off. Later spans are dropped.
pub(crate) async fn shutdown() {
    let Some(i) = installed() else { return };
    let provider = i.provider.clone();
    // The batch thread's last export runs on this runtime: wait for it off the runtime's threads.
    let done =
        tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT)).await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("traces: flushing at shutdown: {e}"),
        Err(e) => tracing::warn!("traces: flushing at shutdown: {e}"),
    }
}

/// The exporter's HTTP client: forge-egress's client, its requests run on the runtime `rt`
/// (the SDK's batch thread has none of its own).
struct EgressHttp {
    client: Arc<EgressClient>,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for EgressHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EgressHttp")
    }
}

#[async_trait]
impl HttpClient for EgressHttp {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let client = self.client.clone();
        let resp = self
            .rt
            .spawn(async move {
                client
                    .request(parts.method, &url, parts.headers, body)
                    .await
            })
            .await??;
        let mut out = http::Response::new(resp.body);
        *out.status_mut() = resp.status;
        *out.headers_mut() = resp.headers;
        Ok(out)
    }
}

tokio::task_local! {
    /// The caller's span context of the A2A request being handled (its `traceparent`).
    static REMOTE_PARENT: Context;
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The caller's trace context from a request's `traceparent` (and `tracestate`), when tracing
/// is on and the header is valid W3C trace context.
pub(crate) fn parent_from_headers(headers: &http::HeaderMap) -> Option<Context> {
    installed()?;
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Run `f` with `parent` as the remote parent of the tasks it starts ([`current_parent`]).
pub(crate) async fn with_parent<F: std::future::Future>(
    parent: Option<Context>,
    f: F,
) -> F::Output {
    match parent {
        Some(cx) => REMOTE_PARENT.scope(cx, f).await,
        None => f.await,
    }
}

/// The parent set by [`with_parent`] around the current task, if any: the caller's span of an
/// A2A request, or the tool call that starts a sub-task.
pub(crate) fn current_parent() -> Option<Context> {
    installed()?;
    REMOTE_PARENT.try_with(Context::clone).ok()
}

/// A span in a task's trace (the task's, or a tool call's), or nothing when tracing is off.
/// Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Trace(Option<Context>);

/// The wall-clock time `t0` (an [`Instant`]) stands for.
fn wall(t0: Instant) -> SystemTime {
    SystemTime::now()
        .checked_sub(t0.elapsed())
        .unwrap_or_else(SystemTime::now)
}

impl Trace {
    /// Start the span of task `task_id` (in conversation `context_id` when it has one), a
    /// child of `parent` (the caller's span) or the root of a new trace.
    pub(crate) fn task(task_id: &str, context_id: Option<&str>, parent: Option<Context>) -> Trace {
        let Some(i) = installed() else {
            return Trace(None);
        };
        // Continuing a caller's trace (A2A `traceparent`) is serving it; a sub-task started by a
        // tool call of this process is internal.
        let kind = if parent
            .as_ref()
            .is_some_and(|p| p.span().span_context().is_remote())
        {
            SpanKind::Server
        } else {
            SpanKind::Internal
        };
        let parent = parent.unwrap_or_default();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", i.agent.clone()),
            KeyValue::new("forge.task.id", task_id.to_string()),
        ];
        if let Some(c) = context_id {
            attrs.push(KeyValue::new("forge.task.context_id", c.to_string()));
        }
        let span = i
            .tracer
            .span_builder(format!("invoke_agent {}", i.agent))
            .with_kind(kind)
            .with_attributes(attrs)
            .start_with_context(&i.tracer, &parent);
        Trace(Some(parent.with_span(span)))
    }

    /// The span's context, as a parent for work started under it.
    pub(crate) fn context(&self) -> Option<Context> {
        self.0.clone()
    }

    /// End the task span: its final state (`done`, `incomplete`, `failed`, `canceled`) and steps;
    /// a failed task's span has status error (the reason stays in the audit log: error texts can
    /// quote URLs and provider answers, which spans never carry).
    pub(crate) fn end_task(&self, status: &str, steps: u64, failed: bool) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        span.set_attribute(KeyValue::new("forge.task.status", status.to_string()));
        span.set_attribute(KeyValue::new("forge.task.steps", steps as i64));
        if failed {
            span.set_status(Status::error(format!("the task {status}")));
        }
        span.end();
    }

    /// A model call that started at `t0`: provider, model, the tokens it used (when it
    /// answered) or a fixed description of its failure (never the provider's text).
    pub(crate) fn model_call(
        &self,
        t0: Instant,
        (provider, model): (&str, &str),
        iteration: usize,
        outcome: Result<(u64, u64), &str>,
    ) {
        let (Some(cx), Some(i)) = (&self.0, installed()) else {
            return;
        };
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("forge.model.iteration", iteration as i64),
        ];
        match outcome {
            Ok((input, output)) => {
                attrs.push(KeyValue::new("gen_ai.usage.input_tokens", input as i64));
                attrs.push(KeyValue::new("gen_ai.usage.output_tokens", output as i64));
                attrs.push(KeyValue::new("forge.outcome", "ok"));
            }
            Err(_) => attrs.push(KeyValue::new("forge.outcome", "error")),
        }
        let mut span = i
            .tracer
            .span_builder(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_start_time(wall(t0))
            .with_attributes(attrs)
            .start_with_context(&i.tracer, cx);
        if let Err(e) = outcome {
            span.set_status(Status::error(e.to_string()));
        }
        span.end();
    }

    /// Start the span of tool call `name` (`call_id`); the egress decisions of the call are its
    /// children. End it with [`Trace::end_tool`].
    pub(crate) fn tool(&self, name: &str, call_id: &str) -> Trace {
        let (Some(cx), Some(i)) = (&self.0, installed()) else {
            return Trace(None);
        };
        let span = i
            .tracer
            .span_builder(format!("execute_tool {name}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", name.to_string()),
                KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
            ])
            .start_with_context(&i.tracer, cx);
        Trace(Some(cx.with_span(span)))
    }

    /// End a tool call's span: its outcome (`ok`, or the error kind) and duration; never its
    /// arguments, output or error text (which can quote URLs and page content).
    pub(crate) fn end_tool(&self, error: Option<&str>, duration_ms: u64) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        span.set_attribute(KeyValue::new("forge.tool.duration_ms", duration_ms as i64));
        match error {
            None => span.set_attribute(KeyValue::new("forge.outcome", "ok")),
            Some(kind) => {
                span.set_attribute(KeyValue::new("forge.outcome", "error"));
                span.set_attribute(KeyValue::new("error.type", kind.to_string()));
                span.set_status(Status::error(kind.to_string()));
            }
        }
        span.end();
    }

    /// One egress decision (made during this span): host, port, allowed or refused, the rule.
    pub(crate) fn egress(&self, d: &Decision) {
        let (Some(cx), Some(i)) = (&self.0, installed()) else {
            return;
        };
        let end = SystemTime::now();
        let start = end.checked_sub(d.duration).unwrap_or(end);
        let decision = match d.outcome {
            Outcome::Allowed | Outcome::Failed => "allowed",
            Outcome::Blocked => "refused",
            Outcome::Malformed => "malformed",
        };
        let mut attrs = vec![
            KeyValue::new("server.address", d.host.clone()),
            KeyValue::new("server.port", i64::from(d.port)),
            KeyValue::new("http.request.method", d.method.clone()),
            KeyValue::new("forge.egress.decision", decision),
            KeyValue::new("forge.egress.rule", d.reason.to_string()),
        ];
        if d.status != 0 {
            attrs.push(KeyValue::new(
                "http.response.status_code",
                i64::from(d.status),
            ));
        }
        if let Some(a) = d.chosen {
            attrs.push(KeyValue::new("network.peer.address", a.ip().to_string()));
        }
        let mut span = i
            .tracer
            .span_builder(format!("egress {}", d.host))
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attrs)
            .start_with_context(&i.tracer, cx);
        if decision != "allowed" {
            span.set_status(Status::error(d.reason.to_string()));
        }
        span.end_with_timestamp(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn unset_endpoint_is_off() {
        assert_eq!(endpoint_from_env(&env_of(&[]), "a").unwrap(), None);
        let disabled = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert_eq!(endpoint_from_env(&disabled, "a").unwrap(), None);
    }

    #[test]
    fn the_general_endpoint_gets_the_traces_path_and_the_signal_one_is_used_as_is() {
        let e = endpoint_from_env(
            &env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318/")]),
            "agent-x",
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.url, "http://localhost:4318/v1/traces");
        assert_eq!(e.entry, "localhost:4318");
        assert!(!e.remote);
        assert_eq!(e.service, "agent-x");
        let e = endpoint_from_env(
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:1"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://[::1]:9/t"),
                ("OTEL_SERVICE_NAME", "svc"),
            ]),
            "agent-x",
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.url, "http://[::1]:9/t");
        assert_eq!(e.entry, "[::1]:9");
        assert_eq!(e.service, "svc");
    }

    #[test]
    fn a_remote_collector_needs_the_explicit_allow() {
        let env = [(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://collector.example.com",
        )];
        let err = endpoint_from_env(&env_of(&env), "a").unwrap_err();
        assert!(matches!(err, TelemetryError::RemoteNotAllowed { .. }));
        assert!(
            err.to_string().contains("FORGE_OTEL_ALLOW_REMOTE=1"),
            "{err}"
        );
        let mut allowed = env.to_vec();
        allowed.push((ALLOW_REMOTE_VAR, "1"));
        let e = endpoint_from_env(&env_of(&allowed), "a").unwrap().unwrap();
        assert_eq!(e.entry, "collector.example.com:443");
        assert!(e.remote);
    }

    #[test]
    fn grpc_and_bad_urls_are_refused_naming_the_variable() {
        let err = endpoint_from_env(
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
            "a",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{err}"
        );
        let err = endpoint_from_env(
            &env_of(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://127.0.0.1/")]),
            "a",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            "{err}"
        );
    }
}
