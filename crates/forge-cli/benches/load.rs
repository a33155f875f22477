//! Load bench for `forge run` (issue 14): N A2A tasks, C at a time, each driving the real browser
//! (scripted model, real Chromium, real proxy, pages on a loopback server), on one replica with
//! the SQLite store and with a PostgreSQL server the bench starts itself. Prints, per store:
//! tasks per minute, p50/p95 task time, failures, the memory (PSS) of forge and its Chromium per
//! live browser context, and what the store costs per task event (appends timed on the same store).
//! With `--cap K < C`, the browser session cap is K and the bench reports how the tasks beyond it
//! were answered (the error and how long it took).
//!
//! ```text
//! cargo bench -p forge-cli --bench load -- --tasks 32 --concurrency 16 --store both
//! cargo bench -p forge-cli --bench load -- --tasks 12 --concurrency 12 --cap 8 --store sqlite
//! ```

// A bench program reports on its own output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forge_state::{SqlStore, StateStore, StoreLocation};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use forge_testkit::pg;
use forge_testkit::site::{Response, Site};

/// How long a task holds its page open on the slow page, so that all concurrent contexts are
/// alive at once when memory is sampled.
const HOLD_MS: u64 = 1500;

struct Args {
    tasks: usize,
    concurrency: usize,
    stores: Vec<&'static str>,
    cap: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        tasks: 32,
        concurrency: 16,
        stores: vec!["sqlite", "postgres"],
        cap: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match k.as_str() {
            "--tasks" => {
                a.tasks = val("--tasks")?
                    .parse()
                    .map_err(|e| format!("--tasks: {e}"))?
            }
            "--concurrency" => {
                a.concurrency = val("--concurrency")?
                    .parse()
                    .map_err(|e| format!("--concurrency: {e}"))?
            }
            "--cap" => a.cap = Some(val("--cap")?.parse().map_err(|e| format!("--cap: {e}"))?),
            "--store" => {
                a.stores = match val("--store")?.as_str() {
                    "sqlite" => vec!["sqlite"],
                    "postgres" => vec!["postgres"],
                    "both" => vec!["sqlite", "postgres"],
                    other => return Err(format!("--store {other}: use sqlite, postgres or both")),
                }
            }
            // cargo bench passes --bench; ignore it and other harness flags.
            _ => {}
        }
    }
    if a.tasks == 0 || a.concurrency == 0 {
        return Err("--tasks and --concurrency must be at least 1".into());
    }
    Ok(a)
}

/// Pages: `/p/N` a small page with a form and a list; `/hold` answers after [`HOLD_MS`].
/// Unbounded (as many connections as the run makes): the bench's own site.
fn serve_site() -> std::net::SocketAddr {
    Site::builder()
        .max_connections(usize::MAX)
        .start(|r| {
            let path = &r.path;
            if path.starts_with("/hold") {
                return Response::bare(
                    200,
                    "<!doctype html><title>held</title><p>done waiting</p>",
                )
                .header("content-type", "text/html")
                .delayed(Duration::from_millis(HOLD_MS));
            }
            let items: String = (0..40)
                .map(|i| {
                    format!("<li><a href=\"/p/{i}\">Item {i}</a> <button>Add {i}</button></li>")
                })
                .collect();
            Response::bare(200, format!("<!doctype html><title>Page {path}</title><h1>Catalogue {path}</h1><form><label>Search <input name=q></label><button>Go</button></form><ul>{items}</ul>"))
                .header("content-type", "text/html")
        })
        .addr
}

fn write_agent(dir: &Path, site: std::net::SocketAddr, cap: Option<usize>) -> PathBuf {
    let skill = dir.join("skills/shop");
    std::fs::create_dir_all(&skill).expect("create the agent dir");
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: shop\ndescription: Browse the test catalogue.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{site}\"]\n---\nBrowse the catalogue.\n"),
    )
    .expect("write SKILL.md");
    std::fs::write(
        dir.join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/p/1\"}}}}\n  - tool_calls:\n      - {{name: browser_observe, arguments: {{}}}}\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/hold\"}}}}\n  - text: \"done\"\n"),
    )
    .expect("write the script");
    let browser = match cap {
        Some(k) => format!("browser:\n  max_sessions: {k}\n"),
        None => String::new(),
    };
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!("agent_id: load-agent\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\negress:\n  mode: allowlist\n{browser}"),
    )
    .expect("write forge.yaml");
    cfg
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        for _ in 0..150 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_forge(
    cfg: &Path,
    dir: &Path,
    state_url: Option<&str>,
) -> Result<(Server, String), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_forge"));
    cmd.arg("run")
        .arg("--config")
        .arg(cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(dir.join("audit.ndjson"))
        .current_dir(dir)
        .env("FORGE_DRAIN_SECONDS", "5")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("stderr.txt")).map_err(|e| e.to_string())?,
        ));
    if let Some(u) = state_url {
        cmd.env("FORGE_STATE_URL", u);
    }
    let mut child = cmd.spawn().map_err(|e| format!("spawn forge: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let server = Server(child);
    let mut lines =
        BufReader::new(tokio::process::ChildStdout::from_std(stdout).map_err(|e| e.to_string())?)
            .lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .map_err(|_| "forge printed no URL within 60 s".to_string())?
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| {
            format!(
                "forge printed no URL: {first:?}; stderr: {}",
                std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default()
            )
        })?
        .to_string();
    // Keep reading stdout so forge never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((server, url))
}

async fn rpc(url: &str, body: &Value, limit: Duration) -> Result<Value, String> {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let go = async {
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| e.to_string())?;
        let payload = body.to_string();
        let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
        let t = String::from_utf8_lossy(&buf).to_string();
        let (_, json) = t.split_once("\r\n\r\n").ok_or("no HTTP body")?;
        serde_json::from_str::<Value>(json).map_err(|e| format!("{e}: {json}"))
    };
    tokio::time::timeout(limit, go)
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
}

fn send(i: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": i, "method": "message/send", "params": {"message": {
        "kind": "message", "role": "user", "messageId": format!("m{i}"),
        // One-shot callers end the conversation's browser with the task (else it stays open
        // for the idle timeout and counts against the session cap).
        "metadata": {"forge": {"close_browser": true}},
        "parts": [{"kind": "text", "text": "browse"}]}}})
}

/// forge and every process below it.
fn tree(root: u32) -> Vec<u32> {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The command name is in parentheses and may contain spaces: fields follow the last ')'.
            if let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok())
            {
                parent.insert(pid, ppid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// Proportional set size of forge and its children, in KiB (shared pages split between sharers,
/// so Chromium's many processes are not counted many times).
fn pss_kib(root: u32) -> u64 {
    tree(root)
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Time `n` event appends on the store the run used (the cost a task event adds).
async fn store_cost(location: &StoreLocation, n: usize) -> Result<(f64, f64), String> {
    let store = SqlStore::open(location).await.map_err(|e| e.to_string())?;
    let ev = json!({"kind": "status-update", "taskId": "bench", "status": {"state": "working", "message": {"parts": [{"kind": "data", "data": {"event": "tool_end", "tool": "browser_observe", "ms": 12}}]}}});
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        store
            .append_event(&format!("bench-{}", i % 16), &ev)
            .await
            .map_err(|e| e.to_string())?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    store.close().await;
    ms.sort_by(f64::total_cmp);
    Ok((ms.iter().sum::<f64>() / n as f64, pct(&ms, 0.95)))
}

async fn run_store(args: &Args, store: &str, site: std::net::SocketAddr) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let cfg = write_agent(
        dir.path(),
        site,
        Some(args.cap.unwrap_or(args.concurrency.max(8))),
    );
    // The server lives as long as this run; dropped (stopped, removed) at the end.
    let pg = if store == "postgres" {
        Some(
            tokio::task::spawn_blocking(pg::PgServer::start_durable)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let state_url = pg.as_ref().map(|p| p.url.clone());
    let (server, url) = start_forge(&cfg, dir.path(), state_url.as_deref()).await?;
    let pid = server.0.id();

    // Warm up: one task launches Chromium; the idle memory after it is the baseline.
    let warm = rpc(&url, &send(0), Duration::from_secs(120)).await?;
    if warm["result"]["status"]["state"] != "completed" {
        return Err(format!("the warm-up task did not complete: {warm}"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = pss_kib(pid);

    let peak = Arc::new(AtomicU64::new(base));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            // Bounded: at most 30 minutes of samples.
            for _ in 0..(30 * 60 * 5) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                peak.fetch_max(pss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    let sem = Arc::new(tokio::sync::Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 1..=args.tasks {
        let (url, sem) = (url.clone(), sem.clone());
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.ok();
            let t = Instant::now();
            let r = rpc(&url, &send(i), Duration::from_secs(300)).await;
            (t.elapsed(), r)
        }));
    }
    let mut times = Vec::new();
    let mut failures: Vec<(f64, String)> = Vec::new();
    for h in handles {
        let (took, r) = h.await.map_err(|e| e.to_string())?;
        let secs = took.as_secs_f64();
        match r {
            Ok(v) if v["result"]["status"]["state"] == "completed" => {
                // A browser call refused (the session cap) is a tool error the model answers
                // about: the task completes, but its result lists no page.
                let result = v["result"]["artifacts"]
                    .as_array()
                    .and_then(|a| a.iter().find(|a| a["name"] == "result"))
                    .map(|a| a["parts"][0]["data"].clone())
                    .unwrap_or_default();
                if result["navigations"]
                    .as_array()
                    .is_some_and(|n| n.is_empty())
                {
                    let answer = result["answer"].as_str().unwrap_or("").to_string();
                    let why = answer
                        .lines()
                        .find(|l| l.contains("browser") || l.contains("session"))
                        .unwrap_or(&answer)
                        .chars()
                        .take(220)
                        .collect::<String>();
                    failures.push((secs, format!("completed without loading a page: {why}")));
                } else {
                    times.push(secs);
                }
            }
            Ok(v) => {
                let why = v["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| {
                        v["result"]["status"]["message"]["parts"][0]["text"]
                            .as_str()
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| v.to_string());
                failures.push((secs, why));
            }
            Err(e) => failures.push((secs, e)),
        }
    }
    let wall = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let peak = peak.load(Ordering::Relaxed);
    drop(server);

    let location = match &state_url {
        Some(u) => StoreLocation::Postgres(u.clone()),
        None => StoreLocation::Sqlite(dir.path().join(".forge/state.db")),
    };
    let (ev_mean, ev_p95) = store_cost(&location, 2000).await?;
    drop(pg);

    times.sort_by(f64::total_cmp);
    // Contexts alive at once: a replica runs at most MAX_RUNNING tasks at a time (the rest wait
    // in `submitted`), and no more than the session cap.
    let running_limit = forge_runtime::MAX_RUNNING.max(1);
    // clamp(1, n) cannot panic: n >= 1 just above.
    let live = args
        .concurrency
        .min(args.cap.unwrap_or(usize::MAX))
        .clamp(1, running_limit);
    let mut out = format!(
        "{store}: {} tasks, {} sent at a time, cap {}, {live} running at once: {:.0} tasks/min, task p50 {:.2} s p95 {:.2} s (as the client sees it, queueing included), {} failed; PSS idle {} MiB, peak {} MiB, {:.0} MiB per live context; store {:.3} ms/event mean, {:.3} ms p95 (2000 appends)",
        args.tasks,
        args.concurrency,
        args.cap.unwrap_or(args.concurrency.max(8)),
        (args.tasks - failures.len()) as f64 / wall * 60.0,
        pct(&times, 0.5),
        pct(&times, 0.95),
        failures.len(),
        base / 1024,
        peak / 1024,
        (peak.saturating_sub(base)) as f64 / 1024.0 / live as f64,
        ev_mean,
        ev_p95,
    );
    let mut seen: HashMap<String, (usize, f64)> = HashMap::new();
    for (secs, why) in failures {
        let e = seen.entry(why).or_insert((0, 0.0));
        e.0 += 1;
        e.1 = e.1.max(secs);
    }
    for (why, (n, slowest)) in seen {
        out.push_str(&format!(
            "\n  {n} x (answered within {slowest:.2} s): {why}"
        ));
    }
    Ok(out)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("load bench: {e}");
            std::process::exit(2);
        }
    };
    if !Path::new("/usr/bin/chromium").exists() && std::env::var_os("FORGE_BROWSER_BIN").is_none() {
        eprintln!(
            "load bench: needs Chromium (scripts/install-deps.sh installs Debian's chromium)"
        );
        std::process::exit(2);
    }
    let site = serve_site();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    for store in args.stores.clone() {
        match run_store(&args, store, site).await {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("{store}: {e}");
                std::process::exit(1);
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at end: {}", load.trim());
}
