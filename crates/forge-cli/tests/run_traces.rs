//! Traces over OTLP/HTTP, end to end: the real `forge run` (A2A server), a fake OpenAI model
//! (forge-testkit) that has the agent call `http_request` on an allowed loopback site and on a
//! refused one, and a loopback OTLP/HTTP receiver (a testkit `Site`) whose request bodies are
//! decoded as OTLP protobuf.
//! - With `OTEL_EXPORTER_OTLP_ENDPOINT` set and the A2A request carrying a W3C `traceparent`:
//!   the receiver gets the task span (child of the caller's span, in the caller's trace), the two
//!   model spans (tokens), the two tool spans and the two egress spans (allowed, refused with its
//!   rule), each under its tool span, all in one trace. They arrive by the flush at shutdown
//!   (SIGTERM).
//! - Unset: no batch-export thread exists in the process and the receiver gets nothing; set but
//!   `OTEL_SDK_DISABLED=true`: nothing either.
//! - `forge run --once` sends its task's spans (a new trace, `OTEL_SERVICE_NAME` as the service)
//!   before it exits.

// Test: prints diagnostics on failure.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Canary, Response, Site};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message as _;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The caller's trace and span (W3C trace context).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// Kills the server when the test ends, however it ends.
struct Server(std::process::Child);

impl Server {
    /// SIGTERM (forge run's signal path, which flushes the spans) and wait at most 20 s.
    fn stop(&mut self) -> bool {
        if let Ok(Some(_)) = self.0.try_wait() {
            return true;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        for _ in 0..200 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.stop() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The OTLP receiver: answers every export with an empty (successful) response.
fn receiver() -> Site {
    Site::builder()
        .max_connections(200)
        .start(|_| Response::bytes(200, "application/x-protobuf", Vec::<u8>::new()))
}

/// Every span the receiver got.
fn spans_of(rx: &Site) -> Vec<Span> {
    let mut out = Vec::new();
    for r in rx.requests() {
        assert_eq!(r.path, "/v1/traces", "the OTLP traces path");
        assert_eq!(
            r.headers.get("content-type").map(String::as_str),
            Some("application/x-protobuf")
        );
        let req = ExportTraceServiceRequest::decode(r.body.as_slice()).expect("OTLP protobuf");
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                out.extend(ss.spans);
            }
        }
    }
    out
}

fn attr(s: &Span, key: &str) -> Option<Value> {
    let v = s
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .clone()?;
    match v.value? {
        AnyValue::StringValue(t) => Some(json!(t)),
        AnyValue::IntValue(i) => Some(json!(i)),
        AnyValue::BoolValue(b) => Some(json!(b)),
        AnyValue::DoubleValue(d) => Some(json!(d)),
        _ => None,
    }
}

/// An agent allowing `site` only, on the fake OpenAI model at `llm`.
fn write_agent(dir: &std::path::Path, llm: &str, site: &str) -> std::path::PathBuf {
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id: trace-agent\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-fake\n  base_url: {llm}/v1\negress:\n  mode: allowlist\n  allowed_domains:\n    - \"{site}\"\n"
        ),
    )
    .unwrap();
    cfg
}

/// A fake model: first turn, `http_request` to `allowed` and to `refused`; then "done".
async fn fake_model(allowed: String, refused: String) -> fake_llm::FakeLlm {
    let responder: fake_llm::Responder = Arc::new(move |_, r| {
        let has_tool = r.body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["role"] == "tool"));
        let body = if has_tool {
            fake_llm::openai_text("done")
        } else {
            fake_llm::openai_tool_calls(&[
                ("c1", "http_request", json!({"url": allowed})),
                ("c2", "http_request", json!({"url": refused})),
            ])
        };
        fake_llm::Reply::Json(200, vec![], body)
    });
    fake_llm::start(responder).await
}

/// Start `forge run` on an ephemeral port with `env`; its URL.
async fn start_server(cfg: &std::path::Path, env: &[(&str, String)]) -> (Server, String) {
    let mut cmd = forge_testkit::forge!();
    for k in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("OPENAI_API_KEY", "sk-test-0000")
        .arg("run")
        .arg("--config")
        .arg(cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(cfg.with_file_name("audit.ndjson"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut server = Server(cmd.spawn().expect("spawn forge run"));
    let stdout = server.0.stdout.take().expect("piped stdout");
    let first = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        BufReader::new(stdout).read_line(&mut l).unwrap();
        l
    })
    .await
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("URL printed: {first}"))
        .to_string();
    (server, url)
}

/// A blocking `message/send` with extra request headers; the JSON-RPC answer.
async fn send(url: &str, headers: &str) -> Value {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let m = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "check the sites"}]});
    let payload = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": m, "configuration": {"blocking": true}}}).to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf))
        .await
        .expect("answer within 60 s")
        .unwrap();
    let t = String::from_utf8_lossy(&buf).to_string();
    serde_json::from_str(t.split_once("\r\n\r\n").expect("HTTP answer").1).expect("JSON")
}

/// Whether process `pid` has the SDK's batch-export thread (Linux: thread names in /proc,
/// cut to 15 bytes).
#[cfg(target_os = "linux")]
fn has_export_thread(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|t| {
        std::fs::read_to_string(t.path().join("comm"))
            .is_ok_and(|c| c.trim().starts_with("OpenTelemetry"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_task_exports_task_model_tool_and_egress_spans_under_the_callers_traceparent() {
    let site = Site::start(|_| Response::text("site A"));
    let refused = Canary::start();
    let rx = receiver();
    let fake = fake_model(site.url("/"), refused.url("/")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_agent(dir.path(), &fake.base(), &site.entry());
    let (mut server, url) = start_server(
        &cfg,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr))],
    )
    .await;
    #[cfg(target_os = "linux")]
    assert!(
        has_export_thread(server.0.id()),
        "tracing on: the batch-export thread runs"
    );
    let got = send(
        &url,
        &format!("traceparent: 00-{CALLER_TRACE}-{CALLER_SPAN}-01\r\n"),
    )
    .await;
    let task_id = got["result"]["id"].as_str().expect("a task").to_string();
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    assert_eq!(site.hits_for("/"), 1, "the allowed site was reached");
    refused.assert_untouched("the agent's egress policy");
    assert!(server.stop(), "forge run stops on SIGTERM");

    let spans = spans_of(&rx);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let trace = hex_decode(CALLER_TRACE);
    for s in &spans {
        assert_eq!(
            s.trace_id, trace,
            "every span in the caller's trace: {names:?}"
        );
    }
    let task = spans
        .iter()
        .find(|s| s.name == "invoke_agent trace-agent")
        .unwrap_or_else(|| panic!("a task span: {names:?}"));
    assert_eq!(
        task.parent_span_id,
        hex_decode(CALLER_SPAN),
        "child of the caller's span"
    );
    assert_eq!(task.kind, SpanKind::Server as i32);
    assert_eq!(attr(task, "forge.task.id"), Some(json!(task_id)));
    assert_eq!(attr(task, "forge.task.status"), Some(json!("done")));
    assert_eq!(attr(task, "forge.task.steps"), Some(json!(2)));

    let children = |name: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name == name && s.parent_span_id == task.span_id)
            .collect()
    };
    let models = children("chat gpt-fake");
    assert_eq!(models.len(), 2, "two model calls: {names:?}");
    let tokens: Vec<(Option<Value>, Option<Value>)> = models
        .iter()
        .map(|m| {
            assert_eq!(attr(m, "gen_ai.provider.name"), Some(json!("openai")));
            (
                attr(m, "gen_ai.usage.input_tokens"),
                attr(m, "gen_ai.usage.output_tokens"),
            )
        })
        .collect();
    assert!(
        tokens.contains(&(Some(json!(11)), Some(json!(7)))),
        "{tokens:?}"
    );
    assert!(
        tokens.contains(&(Some(json!(20)), Some(json!(5)))),
        "{tokens:?}"
    );

    let tools = children("execute_tool http_request");
    assert_eq!(tools.len(), 2, "two tool calls: {names:?}");
    let tool_of = |call: &str| {
        *tools
            .iter()
            .find(|t| attr(t, "gen_ai.tool.call.id") == Some(json!(call)))
            .unwrap_or_else(|| panic!("tool span for {call}"))
    };
    let (ok_tool, refused_tool) = (tool_of("c1"), tool_of("c2"));
    assert_eq!(attr(ok_tool, "forge.outcome"), Some(json!("ok")));
    assert_eq!(attr(refused_tool, "forge.outcome"), Some(json!("error")));
    // No argument reaches a span: the URLs the model passed appear nowhere.
    for s in &spans {
        for kv in &s.attributes {
            let shown = format!("{:?}", kv.value);
            assert!(!shown.contains("http://127.0.0.1"), "{}: {shown}", kv.key);
        }
    }

    let egress_under = |tool: &Span, port: u16| -> Span {
        spans
            .iter()
            .find(|s| {
                s.name.starts_with("egress ")
                    && s.parent_span_id == tool.span_id
                    && attr(s, "server.port") == Some(json!(port))
            })
            .cloned()
            .unwrap_or_else(|| panic!("an egress span for port {port} under its tool: {names:?}"))
    };
    let allowed = egress_under(ok_tool, site.port());
    assert_eq!(
        attr(&allowed, "forge.egress.decision"),
        Some(json!("allowed"))
    );
    assert_eq!(attr(&allowed, "server.address"), Some(json!("127.0.0.1")));
    let rule = attr(&allowed, "forge.egress.rule").expect("the rule that allowed it");
    assert!(rule.to_string().contains(&site.entry()), "{rule}");
    let blocked = egress_under(refused_tool, refused.port());
    assert_eq!(
        attr(&blocked, "forge.egress.decision"),
        Some(json!("refused"))
    );
    let why = attr(&blocked, "forge.egress.rule").expect("why it was refused");
    assert!(!why.as_str().unwrap_or("").is_empty(), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_or_disabled_tracing_starts_no_exporter_and_sends_nothing() {
    let site = Site::start(|_| Response::text("site A"));
    let refused = Canary::start();
    let rx = receiver();
    let fake = fake_model(site.url("/"), refused.url("/")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_agent(dir.path(), &fake.base(), &site.entry());
    let tp = format!("traceparent: 00-{CALLER_TRACE}-{CALLER_SPAN}-01\r\n");

    // Unset: no export thread, and the task runs as before.
    let (mut server, url) = start_server(&cfg, &[]).await;
    let got = send(&url, &tp).await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    #[cfg(target_os = "linux")]
    assert!(
        !has_export_thread(server.0.id()),
        "tracing off: no batch-export thread"
    );
    assert!(server.stop());

    // Set but disabled by the standard switch: nothing reaches the receiver.
    let (mut server, url) = start_server(
        &cfg,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr)),
            ("OTEL_SDK_DISABLED", "true".into()),
        ],
    )
    .await;
    let got = send(&url, &tp).await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    #[cfg(target_os = "linux")]
    assert!(!has_export_thread(server.0.id()));
    assert!(server.stop());
    assert_eq!(site.hits_for("/"), 2, "both tasks ran their tools");
    assert_eq!(rx.hits(), 0, "no span was exported");
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_run_once_flushes_its_task_as_a_new_trace_before_exiting() {
    let site = Site::start(|_| Response::text("site A"));
    let refused = Canary::start();
    let rx = receiver();
    let fake = fake_model(site.url("/"), refused.url("/")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_agent(dir.path(), &fake.base(), &site.entry());
    let mut cmd = forge_testkit::forge!();
    cmd.env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", rx.addr))
        .env("OTEL_SERVICE_NAME", "once-svc")
        .env("OPENAI_API_KEY", "sk-test-0000")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "check the sites"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run forge"))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The process has exited: whatever the receiver has was sent before the exit.
    let spans = spans_of(&rx);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let task = spans
        .iter()
        .find(|s| s.name == "invoke_agent trace-agent")
        .unwrap_or_else(|| panic!("a task span: {names:?}"));
    assert!(task.parent_span_id.is_empty(), "a new trace: no parent");
    assert_eq!(task.kind, SpanKind::Internal as i32);
    assert_eq!(spans.len(), 7, "task, 2 model, 2 tool, 2 egress: {names:?}");
    for s in &spans {
        assert_eq!(s.trace_id, task.trace_id, "one trace: {names:?}");
    }
    let service = rx
        .requests()
        .iter()
        .filter_map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).ok())
        .flat_map(|e| e.resource_spans)
        .filter_map(|r| r.resource)
        .flat_map(|r| r.attributes)
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value)
        .and_then(|v| v.value);
    assert_eq!(service, Some(AnyValue::StringValue("once-svc".into())));
}
