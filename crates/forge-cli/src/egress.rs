//! `forge egress check` and `forge egress serve`: build the agent's egress policy (forge.yaml
//! `egress`, the active skills' `egress_domains`, `--allow`) with the same function the Runner
//! uses (`forge_runtime::egress_policy`), then decide one URL or run the loopback proxy
//! standalone. The policy, resolution and the proxy live in forge-egress.
//!
//! Exit codes: `check` 0 allowed, 3 blocked, 2 malformed, 1 error (unreadable config, DNS failure);
//! `serve` 0 after a clean stop on Ctrl-C/SIGTERM, 1 on error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use forge_egress::client::parse_url;
use forge_egress::connect::{ConnectLimits, Connector, TcpDialer};
use forge_egress::proxy::{
    Decision, EgressObserver, EgressProxy, Outcome, ProxyLimits, ProxyOptions,
};
use forge_egress::resolve::{Resolver, StaticResolver, SystemResolver};
use forge_egress::thread::ProxyThread;
use forge_egress::{EgressError, EgressPolicy};
use forge_runtime::{egress_policy, EgressPolicyError};
use forge_skills::miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource, Report,
};

#[derive(Subcommand)]
pub(crate) enum EgressCommand {
    /// Decide one URL against the egress policy (exit 0 allowed, 3 blocked, 2 malformed).
    Check(CheckArgs),
    /// Run the egress proxy standalone on 127.0.0.1 (use it as HTTP_PROXY/HTTPS_PROXY).
    Serve(ServeArgs),
}

/// Where the policy comes from.
#[derive(Args, Clone, Default)]
pub(crate) struct PolicyArgs {
    /// The agent's forge.yaml (default: ./forge.yaml when it exists, else no config: deny-all).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also allow this entry (`example.com`, `*.example.org`, `host:port`, `127.0.0.1:8080`).
    /// Honoured in every mode, deny-all included. Repeatable.
    #[arg(long = "allow", value_name = "ENTRY")]
    allow: Vec<String>,
    /// Answer DNS for HOST with these addresses instead of asking DNS (like curl). Repeatable.
    #[arg(long = "resolve", value_name = "HOST=IP[,IP]")]
    resolve: Vec<String>,
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The URL to decide (http:// or https://).
    url: String,
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Port on 127.0.0.1 (default: an ephemeral port).
    #[arg(long, value_name = "N", default_value_t = 0)]
    listen_port: u16,
    /// Log only refused and failed requests (default: one stderr line per request or tunnel).
    #[arg(long)]
    quiet: bool,
}

pub(crate) fn run(cmd: EgressCommand) -> ExitCode {
    // One thread: `check` makes one lookup; `serve` runs the proxy on a thread of its own
    // (ProxyThread) and keeps only signals and the log flush here.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match cmd {
        EgressCommand::Check(a) => rt.block_on(check(a)),
        EgressCommand::Serve(a) => rt.block_on(serve(a)),
    }
}

/// The policy and resolver built from the arguments.
struct Built {
    policy: Arc<EgressPolicy>,
    resolver: Arc<dyn Resolver>,
    config: Option<PathBuf>,
    /// forge.yaml `egress.max_tunnels` (the default without a forge.yaml).
    max_tunnels: usize,
}

fn build(args: &PolicyArgs) -> Result<Built, ExitCode> {
    let config = match &args.config {
        Some(p) => Some(p.clone()),
        None => Some(PathBuf::from("forge.yaml")).filter(|p| p.is_file()),
    };
    let agent = match &config {
        Some(path) => Some(load_agent(path)?),
        None => None,
    };
    // The same function `forge run` and `forge tool` build their policy with (through the Runner).
    let policy = egress_policy(agent.as_ref(), &[], &args.allow).map_err(|e| {
        report_policy_error(&e);
        ExitCode::from(1)
    })?;
    let mut resolver = StaticResolver::new().with_fallback(Arc::new(SystemResolver));
    for spec in &args.resolve {
        resolver = resolver.add_mapping(spec).map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(1)
        })?;
    }
    let max_tunnels = agent
        .as_ref()
        .map_or(ProxyLimits::default().max_tunnels, |a| {
            a.config.egress.max_tunnels as usize
        });
    Ok(Built {
        policy: Arc::new(policy),
        resolver: Arc::new(resolver),
        config,
        max_tunnels,
    })
}

/// Render a policy error pointing at the file and line that holds the offending value (forge.yaml
/// for `egress.*` fields, the skill's SKILL.md for its `egress_domains`); `--allow` has no file.
fn report_policy_error(err: &EgressPolicyError) {
    let e = &err.error;
    let located = err.file.as_ref().and_then(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        let at = text
            .find(e.value.as_str())
            .filter(|_| !e.value.is_empty())?;
        Some((p.clone(), text, at))
    });
    let Some((path, text, at)) = located else {
        eprintln!("error: {e}");
        return;
    };
    let line = text[..at].matches('\n').count() + 1;
    let diag = MietteDiagnostic::new(format!(
        "{}:{line}: invalid {} value {:?}: {}",
        path.display(),
        e.field,
        e.value,
        e.why
    ))
    .with_code("forge::egress::policy")
    .with_label(LabeledSpan::at(at..at + e.value.len(), e.why.clone()))
    .with_help(e.hint.clone());
    let report =
        Report::new(diag).with_source_code(NamedSource::new(path.display().to_string(), text));
    let mut out = String::new();
    let handler =
        GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
    if handler.render_report(&mut out, report.as_ref()).is_err() || out.is_empty() {
        out = format!("error: {}:{line}: {e}\n", path.display());
    }
    eprint!("{out}");
}

/// Load the agent at `path`, or render why not.
fn load_agent(path: &Path) -> Result<forge_skills::Agent, ExitCode> {
    forge_skills::Agent::load(path).map_err(|e| {
        let mut out = String::new();
        let handler =
            GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
        if handler.render_report(&mut out, &e).is_err() || out.is_empty() {
            out = format!("error: {e}\n");
        }
        eprint!("{out}");
        ExitCode::from(1)
    })
}

async fn check(args: CheckArgs) -> ExitCode {
    let built = match build(&args.policy) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let mut out = String::new();
    out.push_str(&format!("url:      {}\n", args.url));
    out.push_str(&format!(
        "policy:   mode {}{}\n",
        built.policy.mode(),
        built
            .config
            .as_ref()
            .map(|p| format!(", from {}", p.display()))
            .unwrap_or_default()
    ));
    let url = match parse_url(&args.url) {
        Ok(u) => u,
        Err(e) => {
            out.push_str("decision: malformed\n");
            out.push_str(&format!("rule:     {e}\n"));
            print!("{out}");
            return ExitCode::from(2);
        }
    };
    out.push_str(&format!("target:   {}:{}\n", url.host, url.port));
    let connector = Connector {
        policy: built.policy.clone(),
        resolver: built.resolver.clone(),
        dialer: Arc::new(TcpDialer),
        limits: ConnectLimits::default(),
    };
    // Validation only: policy, one lookup, every answer checked. Nothing is dialed.
    let code = match connector.validate(&url.host, url.port, url.kind()).await {
        Ok(v) => {
            out.push_str("decision: allowed\n");
            out.push_str(&format!("rule:     {}\n", v.allowed.rule));
            if url.host.ip().is_none() {
                out.push_str(&format!("resolved: {}\n", join(&v.resolved)));
            }
            ExitCode::SUCCESS
        }
        Err((EgressError::Blocked(r), resolved)) => {
            let malformed = r.is_malformed();
            out.push_str(if malformed {
                "decision: malformed\n"
            } else {
                "decision: blocked\n"
            });
            out.push_str(&format!("reason:   {}\n", r.code()));
            out.push_str(&format!("rule:     {r}\n"));
            if !resolved.is_empty() && url.host.ip().is_none() {
                out.push_str(&format!("resolved: {}\n", join(&resolved)));
            }
            ExitCode::from(if malformed { 2 } else { 3 })
        }
        Err((e, _)) => {
            out.push_str("decision: error\n");
            out.push_str(&format!("error:    {e}\n"));
            print!("{out}");
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    print!("{out}");
    code
}

fn join(ips: &[std::net::IpAddr]) -> String {
    ips.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Logs decisions on stderr, one line each: every decision, or with `--quiet` only refusals and
/// failures. The proxy thread only formats a line into a buffer; the lines are written from the
/// main thread in batches ([`StderrLog::flush`]: every [`LOG_FLUSH_EVERY`], as soon as
/// [`LOG_BATCH_BYTES`] have gathered, and at shutdown). So a request costs no stderr write
/// (stderr is unbuffered: a formatted `eprintln!` is a write(2) per piece of the line), and a slow
/// stderr (a pipe nobody reads fast enough, a terminal) never stalls the proxy: past
/// [`LOG_MAX_BYTES`] waiting, lines are dropped and the number dropped is logged.
struct StderrLog {
    quiet: bool,
    buf: std::sync::Mutex<Vec<u8>>,
    /// Held while writing, so that batches reach stderr in order.
    out: std::sync::Mutex<()>,
    /// Lines dropped since the last write because [`LOG_MAX_BYTES`] were waiting.
    dropped: std::sync::atomic::AtomicU64,
    /// Wakes the writer when a batch has gathered.
    full: tokio::sync::Notify,
}

/// How often gathered decision lines are written at the latest.
const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The writer is woken once this much has gathered.
const LOG_BATCH_BYTES: usize = 32 * 1024;
/// Past this much waiting to be written, lines are dropped (and counted).
const LOG_MAX_BYTES: usize = 4 * 1024 * 1024;

impl StderrLog {
    fn new(quiet: bool) -> Self {
        StderrLog {
            quiet,
            buf: std::sync::Mutex::new(Vec::with_capacity(LOG_BATCH_BYTES)),
            out: std::sync::Mutex::new(()),
            dropped: std::sync::atomic::AtomicU64::new(0),
            full: tokio::sync::Notify::new(),
        }
    }

    /// Write the gathered lines (and how many were dropped, if any).
    fn flush(&self) {
        use std::sync::atomic::Ordering;
        // Poisoned locks still guard whole lines (nothing panics while holding them).
        let _order = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let pending = {
            let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
            if buf.is_empty() {
                Vec::new()
            } else {
                std::mem::replace(&mut *buf, Vec::with_capacity(LOG_BATCH_BYTES))
            }
        };
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if pending.is_empty() && dropped == 0 {
            return;
        }
        let mut err = std::io::stderr().lock();
        // Nowhere to report a failed write to stderr; the lines are lost either way.
        let _ = err.write_all(&pending);
        if dropped > 0 {
            let _ = writeln!(
                err,
                "egress: {dropped} decision line(s) dropped: stderr did not keep up"
            );
        }
        let _ = err.flush();
    }
}

impl EgressObserver for StderrLog {
    fn on_decision(&self, d: &Decision) {
        let what = match d.outcome {
            Outcome::Allowed if self.quiet => return,
            Outcome::Allowed => "allowed",
            Outcome::Blocked => "blocked",
            Outcome::Malformed => "malformed",
            Outcome::Failed => "failed",
        };
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        if buf.len() >= LOG_MAX_BYTES {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let before = buf.len();
        // Writing into a Vec cannot fail.
        let _ = write!(buf, "egress {what} {} {}:{}", d.method, d.host, d.port);
        if let Some(c) = d.chosen {
            let _ = write!(buf, " -> {c}");
        }
        let _ = writeln!(
            buf,
            " status={} up={} down={} {}ms: {}",
            d.status,
            d.bytes_up,
            d.bytes_down,
            d.duration.as_millis(),
            d.reason
        );
        if before < LOG_BATCH_BYTES && buf.len() >= LOG_BATCH_BYTES {
            self.full.notify_one();
        }
    }
}

async fn serve(args: ServeArgs) -> ExitCode {
    let built = match build(&args.policy) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let log = Arc::new(StderrLog::new(args.quiet));
    let thread = match ProxyThread::start() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot start the proxy thread: {e}");
            return ExitCode::from(1);
        }
    };
    let opts = ProxyOptions {
        thread: Some(thread),
        observer: Some(log.clone()),
        resolver: built.resolver.clone(),
        listen_port: args.listen_port,
        limits: ProxyLimits {
            max_tunnels: built.max_tunnels,
            ..ProxyLimits::default()
        },
        ..Default::default()
    };
    let (addr, handle) = match EgressProxy::serve(built.policy.clone(), opts).await {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "error: cannot listen on 127.0.0.1:{}: {e}",
                args.listen_port
            );
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "egress mode {} with {} entries; set HTTP_PROXY and HTTPS_PROXY to http://{addr}",
        built.policy.mode(),
        built.policy.entries().len()
    );
    println!("proxy listening on http://{addr}");
    let _ = std::io::stdout().flush();
    let flusher = {
        let log = log.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(LOG_FLUSH_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = log.full.notified() => {}
                }
                log.flush();
            }
        })
    };
    crate::signals::wait_for_shutdown().await;
    log.flush();
    eprintln!("stopping the egress proxy");
    let stopped = tokio::time::timeout(Duration::from_secs(10), handle.shutdown()).await;
    flusher.abort();
    // The decisions of the exchanges that ended during shutdown.
    log.flush();
    if stopped.is_err() {
        eprintln!("error: the proxy did not stop within 10s");
        return ExitCode::from(1);
    }
    eprintln!("egress proxy stopped");
    ExitCode::SUCCESS
}
