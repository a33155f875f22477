//! `forge run` (one task with `--once`, or serve A2A) and `forge audit verify`.
//!
//! `forge run` loads the agent, resolves the model, assembles the tools (with the model host
//! added to the egress allowlist), then either runs one task and prints the answer and the
//! artifacts' paths, or serves A2A until Ctrl-C/SIGTERM. `--demo-site DIR` also serves DIR on an
//! ephemeral 127.0.0.1 port and exports its `127.0.0.1:PORT` as `FORGE_DEMO_SITE` before the agent
//! is loaded (the bundled example's skill allowlists `$FORGE_DEMO_SITE`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use forge_egress::client::{ClientOptions, EgressClient};
use forge_runtime::a2a::{self, CardInfo, TaskStore};
use forge_runtime::agent_loop::assembled::{
    AssembledLoopTools, AssembledSessions, AuditEgressObserver, AuditToolEvents,
};
use forge_runtime::agent_loop::{
    system_prompt, AgentLoop, LoopConfig, LoopEvent, PromptSkill, SessionCloser,
};
use forge_runtime::assemble::{assemble, AssembleOptions, AssembledTools};
use forge_runtime::audit::{self, AuditLog};
use forge_runtime::providers::fallback::Fallback;
use forge_runtime::providers::transport::EgressTransport;
use forge_runtime::providers::{
    build_provider, resolve_fallback, resolve_model, ModelHttp, ModelSettings, Provider,
    RetryPolicy,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Run an agent: one task with --once, or serve it over A2A.
#[derive(Args)]
pub struct RunArgs {
    /// The agent's forge.yaml.
    #[arg(long, value_name = "FILE", default_value = "forge.yaml")]
    config: PathBuf,
    /// Address to serve A2A on. Anything but loopback requires a bearer token (.forge/runtime.token).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to serve A2A on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Run one task with this prompt, print the answer and the artifacts' paths, and exit.
    #[arg(long, value_name = "PROMPT")]
    once: Option<String>,
    /// Model provider (openai, anthropic, ollama, scripted); overrides forge.yaml and FORGE_MODEL_PROVIDER.
    #[arg(long)]
    provider: Option<String>,
    /// Model name (for scripted: the script file); overrides forge.yaml and MODEL_NAME.
    #[arg(long)]
    model: Option<String>,
    /// Write the audit log (hash-chained NDJSON) to this file instead of stderr (appends).
    #[arg(long, value_name = "FILE")]
    audit_file: Option<PathBuf>,
    /// Also serve this directory on 127.0.0.1 (ephemeral port, exported as FORGE_DEMO_SITE).
    #[arg(long, value_name = "DIR")]
    demo_site: Option<PathBuf>,
    /// Extra egress allowlist entry (repeatable), like forge.yaml egress.allowed_domains.
    #[arg(long = "allow", value_name = "ENTRY")]
    allow: Vec<String>,
    /// Model turns per task before giving up.
    #[arg(long, default_value_t = 50)]
    max_iterations: usize,
}

/// Work with audit logs.
#[derive(Subcommand)]
pub enum AuditCommand {
    /// Check an audit log's hash chain; exit 1 if a line was altered, removed, inserted or reordered.
    Verify {
        /// The NDJSON audit log (from `forge run --audit-file`).
        file: PathBuf,
    },
}

/// `forge audit ...`
pub fn audit(cmd: AuditCommand) -> ExitCode {
    match cmd {
        AuditCommand::Verify { file } => match audit::verify_file(&file) {
            Ok(s) => {
                println!(
                    "{}: chain intact: {} events, head {}",
                    file.display(),
                    s.events,
                    s.head
                );
                println!(
                    "  sessions: {} started, {} ended{}",
                    s.sessions_started,
                    s.sessions_ended,
                    if s.sessions_started > s.sessions_ended {
                        " (a session has no session_end: the log was cut short, or a run is still going)"
                    } else {
                        ""
                    }
                );
                for (event, n) in &s.counts {
                    println!("  {event}: {n}");
                }
                if !s.blocked_hosts.is_empty() {
                    println!(
                        "  hosts blocked by the egress policy: {}",
                        s.blocked_hosts.join(", ")
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: audit log verification FAILED at {e}", file.display());
                ExitCode::from(1)
            }
        },
    }
}

/// `forge run ...`
pub fn run(args: RunArgs) -> ExitCode {
    // The demo site is bound before anything else so its address can be exported while the
    // process is still single-threaded (the skills expand $FORGE_DEMO_SITE when they load).
    let demo = match &args.demo_site {
        Some(dir) => match bind_demo_site(dir) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("forge run: --demo-site {}: {e}", dir.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forge run: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(run_async(args, demo))
}

struct DemoSite {
    listener: std::net::TcpListener,
    dir: PathBuf,
}

fn bind_demo_site(dir: &Path) -> Result<DemoSite, String> {
    if !dir.join("index.html").is_file() {
        return Err("not a directory with an index.html".into());
    }
    let dir = dir.canonicalize().map_err(|e| e.to_string())?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot bind 127.0.0.1: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Still single-threaded here: no other thread reads the environment concurrently.
    std::env::set_var("FORGE_DEMO_SITE", addr.to_string());
    Ok(DemoSite { listener, dir })
}

fn env_get(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

async fn run_async(args: RunArgs, demo: Option<DemoSite>) -> ExitCode {
    let agent = match forge_skills::Agent::load(&args.config) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{:?}", forge_skills::miette::Report::new(e));
            return ExitCode::from(2);
        }
    };
    let audit = match &args.audit_file {
        Some(p) => match AuditLog::open_file(p) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("forge run: {e}");
                return ExitCode::from(2);
            }
        },
        None => AuditLog::stderr(),
    };
    let settings = agent
        .config
        .model
        .as_ref()
        .map(|m| ModelSettings {
            provider: Some(m.provider.clone()),
            name: Some(m.name.clone()),
            base_url: m.base_url.clone(),
        })
        .unwrap_or_default();
    let model = match resolve_model(
        &settings,
        args.provider.as_deref(),
        args.model.as_deref(),
        &env_get,
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(2);
        }
    };
    let mut fallbacks = Vec::new();
    for (i, f) in agent
        .config
        .model
        .iter()
        .flat_map(|m| m.fallbacks.iter())
        .enumerate()
    {
        let entry = ModelSettings {
            provider: Some(f.provider.clone()),
            name: Some(f.name.clone()),
            base_url: f.base_url.clone(),
        };
        match resolve_fallback(&entry, &env_get) {
            Ok(m) => fallbacks.push(m),
            Err(e) => {
                eprintln!(
                    "forge run: {}: model.fallbacks[{i}]: {e}",
                    args.config.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let mut opts = AssembleOptions::default();
    for m in std::iter::once(&model).chain(fallbacks.iter()) {
        if let Some(entry) = m.egress_entry() {
            opts.forge_egress_entries
                .push((format!("model provider {}", m.provider), entry));
        }
    }
    opts.cli_egress_entries = args.allow.clone();
    opts.events = Some(Arc::new(AuditToolEvents(audit.clone())));
    opts.deps.proxy.observer = Some(Arc::new(AuditEgressObserver::proxy(audit.clone())));
    opts.deps.client.observer = Some(Arc::new(AuditEgressObserver::client(audit.clone())));
    let tools = match assemble(&agent, opts).await {
        Ok(t) => Arc::new(t),
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(1);
        }
    };
    let Some(client) = tools.egress().client() else {
        eprintln!("forge run: the egress client is not available");
        return ExitCode::from(1);
    };
    // Model calls get their own client on the same policy value: a longer time limit than tool
    // requests (generations can be slow) and a larger body cap; decisions are audited alike.
    let retry = RetryPolicy::from_env(&env_get);
    let model_client = Arc::new(EgressClient::new(
        tools.egress().policy().clone(),
        ClientOptions {
            timeout: retry.request_timeout + Duration::from_secs(5),
            max_body_bytes: 32 * 1024 * 1024,
            observer: Some(Arc::new(AuditEgressObserver::client(audit.clone()))),
            ..ClientOptions::default()
        },
    ));
    let transport: Arc<dyn ModelHttp> = Arc::new(EgressTransport::new(model_client));
    let primary = match build_provider(
        &model,
        &agent.dir,
        transport.clone(),
        retry.clone(),
        &env_get,
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(2);
        }
    };
    let mut backups = Vec::new();
    for (i, m) in fallbacks.iter().enumerate() {
        match build_provider(m, &agent.dir, transport.clone(), retry.clone(), &env_get) {
            Ok(p) => backups.push(p),
            Err(e) => {
                eprintln!("forge run: model.fallbacks[{i}]: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let provider: Arc<dyn Provider> = if backups.is_empty() {
        primary
    } else {
        Arc::new(Fallback::new(primary, backups))
    };
    let loop_tools = Arc::new(AssembledLoopTools::new(&tools));
    let specs = forge_runtime::agent_loop::LoopTools::specs(&*loop_tools);
    let skills: Vec<PromptSkill> = agent
        .skills
        .iter()
        .map(|s| PromptSkill {
            name: s.name.clone(),
            description: s.description.clone(),
            body: s.body.clone(),
        })
        .collect();
    let description = agent_description(&agent);
    let prompt = system_prompt(
        &agent.config.agent_id,
        description.as_deref(),
        &skills,
        &specs,
    );
    let sessions: Option<Arc<dyn SessionCloser>> = if tools.browser().is_some() {
        Some(Arc::new(AssembledSessions::new(
            tools.clone(),
            audit.clone(),
        )))
    } else {
        None
    };
    let agent_loop = Arc::new(AgentLoop {
        provider,
        tools: loop_tools,
        system_prompt: prompt,
        audit: audit.clone(),
        config: LoopConfig {
            max_iterations: args.max_iterations.max(1),
            tool_timeout: tools.timeout(),
            ..Default::default()
        },
        files_dir: tools.files_dir().to_path_buf(),
        egress: Some(client),
        sessions,
    });
    eprintln!(
        "forge: agent {} | model {}/{} | {} tools{}",
        agent.config.agent_id,
        model.provider,
        model.name,
        specs.len(),
        if tools.browser().is_some() {
            " (browser enabled)"
        } else {
            ""
        }
    );
    let demo_stop = CancellationToken::new();
    if let Some(d) = demo {
        match tokio::net::TcpListener::from_std(d.listener) {
            Ok(l) => {
                eprintln!(
                    "forge: demo site {} on http://{}/",
                    d.dir.display(),
                    std::env::var("FORGE_DEMO_SITE").unwrap_or_default()
                );
                tokio::spawn(serve_demo_site(l, d.dir, demo_stop.clone()));
            }
            Err(e) => {
                eprintln!("forge run: demo site: {e}");
                return ExitCode::from(1);
            }
        }
    }

    let code = match &args.once {
        Some(p) => run_once(&agent_loop, p).await,
        None => serve(&args, &agent, agent_loop.clone(), &audit).await,
    };
    demo_stop.cancel();
    drop(agent_loop);
    // Stop the browser (removing its profile) and the proxy; tasks release their references
    // as they finish, so wait briefly for the last one.
    let mut tools = tools;
    for _ in 0..50 {
        match Arc::try_unwrap(tools) {
            Ok(t) => {
                shutdown_tools(t).await;
                break;
            }
            Err(t) => {
                tools = t;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    code
}

/// The agent's description: the description of its root skill file (forge.yaml `skills.path`,
/// default `SKILL.md` next to forge.yaml), as in initializ/forge, when there is one.
fn agent_description(agent: &forge_skills::Agent) -> Option<String> {
    let rel = agent
        .config
        .skills
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from("SKILL.md"));
    let root = agent.dir.join(rel).canonicalize().ok()?;
    agent
        .skills
        .iter()
        .find(|s| s.path.canonicalize().ok().as_ref() == Some(&root))
        .map(|s| s.description.trim().to_string())
        .filter(|d| !d.is_empty())
}

async fn shutdown_tools(t: AssembledTools) {
    t.shutdown().await;
}

fn progress_line(ev: &LoopEvent) -> Option<String> {
    match ev {
        LoopEvent::ModelCall { .. } => None,
        LoopEvent::Thought(t) => Some(format!("  · {}", t.lines().next().unwrap_or(""))),
        LoopEvent::ToolStart {
            name, arguments, ..
        } => {
            let mut a = arguments.to_string();
            if a.chars().count() > 120 {
                a = a.chars().take(120).collect::<String>() + "…";
            }
            Some(format!("  → {name} {a}"))
        }
        LoopEvent::ToolEnd {
            name,
            ok,
            summary,
            duration_ms,
            ..
        } => Some(format!(
            "  {} {name} ({duration_ms} ms): {summary}",
            if *ok { "✓" } else { "✗" }
        )),
    }
}

async fn run_once(agent_loop: &Arc<AgentLoop>, prompt: &str) -> ExitCode {
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("forge: cancelling (Ctrl-C)");
            c2.cancel();
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if let Some(l) = progress_line(&ev) {
                eprintln!("{l}");
            }
        }
    });
    let task_id = a2a::tasks::new_id();
    let result = agent_loop
        .run_task(&task_id, prompt, vec![], cancel, Some(tx))
        .await;
    let _ = printer.await;
    match result {
        Ok(o) => {
            println!("{}", o.answer.trim_end());
            if !o.artifacts.is_empty() {
                println!();
                println!("artifacts:");
                for a in &o.artifacts {
                    println!("  {}", a.display());
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("forge run: task failed: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve(
    args: &RunArgs,
    agent: &forge_skills::Agent,
    agent_loop: Arc<AgentLoop>,
    audit: &AuditLog,
) -> ExitCode {
    let addr = SocketAddr::new(args.host, args.port);
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("forge run: cannot listen on {addr}: {e}");
            return ExitCode::from(1);
        }
    };
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(1);
        }
    };
    let token_path = agent.dir.join(".forge").join("runtime.token");
    let from_env = std::env::var("FORGE_RUNTIME_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let token_from_env = from_env.is_some();
    let token = if args.host.is_loopback() {
        None
    } else if let Some(t) = from_env {
        // Provided by the operator (e.g. from a Kubernetes Secret): used as is, not written anywhere.
        if t.len() < 16 || !t.chars().all(|c| c.is_ascii_graphic()) {
            eprintln!("forge run: FORGE_RUNTIME_TOKEN must be at least 16 printable ASCII characters without spaces");
            return ExitCode::from(2);
        }
        audit.add_secret(&t);
        Some(t)
    } else {
        match a2a::load_or_create_token(&token_path) {
            Ok((t, _)) => {
                audit.add_secret(&t);
                Some(t)
            }
            Err(e) => {
                eprintln!(
                    "forge run: cannot write the bearer token to {}: {e}",
                    token_path.display()
                );
                return ExitCode::from(1);
            }
        }
    };
    let info = CardInfo {
        name: agent.config.agent_id.clone(),
        description: agent_description(agent).unwrap_or_else(|| {
            format!(
                "forge agent {} ({} skills)",
                agent.config.agent_id,
                agent.skills.len()
            )
        }),
        version: agent.config.version.clone(),
        skills: agent
            .skills
            .iter()
            .map(|s| (s.name.clone(), s.description.clone(), s.tags.clone()))
            .collect(),
    };
    let url = format!("http://{local}/");
    let card = a2a::agent_card(&info, &url, token.is_some());
    let store = TaskStore::new(agent_loop);
    let handle = match a2a::serve(listener, store, card, token.clone()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(1);
        }
    };
    println!(
        "forge: serving agent {} over A2A on {url} (card: {url}.well-known/agent-card.json)",
        agent.config.agent_id
    );
    if let Some(t) = &token {
        if token_from_env {
            println!("forge: bearer token required (the one in FORGE_RUNTIME_TOKEN)");
        } else {
            println!(
                "forge: bearer token required (from {}): {t}",
                token_path.display()
            );
        }
    }
    wait_for_shutdown().await;
    eprintln!("forge: shutting down");
    handle.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A minimal static file server for the demo site: GET only, files under `dir` only.
async fn serve_demo_site(listener: tokio::net::TcpListener, dir: PathBuf, stop: CancellationToken) {
    loop {
        let (mut sock, _) = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => match a { Ok(s) => s, Err(_) => continue },
        };
        let dir = dir.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16_384 {
                match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let mut first = head.lines().next().unwrap_or("").split(' ');
            let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or("/"));
            let path = target.split(['?', '#']).next().unwrap_or("/");
            let rel = path.trim_start_matches('/');
            let rel = if rel.is_empty() { "index.html" } else { rel };
            let rel_path = Path::new(rel);
            let safe = rel_path
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            let file = dir.join(rel_path);
            let (status, ctype, body) = match (method, safe) {
                ("GET" | "HEAD", true) => match tokio::fs::read(&file).await {
                    Ok(b) => ("200 OK", content_type(&file), b),
                    Err(_) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
                },
                ("GET" | "HEAD", false) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
                _ => (
                    "405 Method Not Allowed",
                    "text/plain",
                    b"method not allowed\n".to_vec(),
                ),
            };
            let head = format!("HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            let _ = sock.write_all(head.as_bytes()).await;
            if method != "HEAD" {
                let _ = sock.write_all(&body).await;
            }
            let _ = sock.shutdown().await;
        });
    }
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}
