//! Lightpanda against Chromium on the shared corpus (issue 26), one run, same pages, both engines
//! driven by forge's real `BrowserManager` and tools through forge's real egress proxy (confined
//! in a network namespace where the machine offers one, as `forge run` does):
//!
//! - start to first observation: a fresh manager, then launch, session and `browser_navigate`
//!   (load and observation) of a small page, each step timed, then one more observation alone;
//!   several repetitions, engines alternating;
//! - the 18 corpus pages (the 12 readability pages and 6 playwright pages: a form, select,
//!   checkboxes, shadow DOM twice, nested frames) in one session per engine: per page the
//!   navigate's wall time and the CPU (utime+stime) the engine's process tree spent on navigate
//!   and `browser_state`; for the whole pass the tree's CPU (live processes plus their reaped
//!   children: cutime+cstime) and its peak memory, summed PSS (from smaps_rollup) and summed RSS
//!   over the tree, sampled every 100 ms;
//! - observation bytes per page (the `browser_state` result, fence included) for each engine,
//!   the pages one engine cannot read (an error, or an observation with no element and no
//!   text), and the byte ratio on the pages both read.
//!
//! The engine's tree: its process, every descendant, every process of its process group, and
//! processes whose command line names its profile dir (Chromium's crashpad handlers detach).
//!
//! `FORGE_LIGHTPANDA_BIN=<the wheel's lightpanda binary> cargo bench -p forge-browser --bench engines -- /work/shared/corpus`
//! (`FORGE_CORPUS` may name the corpus instead; `FORGE_BENCH_REPS` the start repetitions, default
//! 5; `FORGE_BENCH_DUMP=<dir>` writes each observation there as `<engine>/<page>.txt`). A
//! `lightpanda` found on PATH may be a script (the pyenv shim runs bash and Python before the
//! binary): the report says so, since that adds its start-up to every launch. Prints markdown.
// Printing is allowed here (a figures run: its results are its output).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::page::{CreateIsolatedWorldParams, NavigateParams};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use forge_browser::{observe, BrowserConfig, BrowserManager, EngineKind};
use forge_egress::confine::{Availability, Confiner, NsKind};
use forge_egress::proxy::ProxyHandle;
use forge_testkit::browser::{processes_mentioning, proxy};
use forge_testkit::site::Site;
use forge_tools::ToolContext;
use serde_json::json;

use common::{
    all_pids, corpus_dir, fenced, median, ms, proc_kb, readability_pages, stat_fields,
    static_server_handler, tool,
};

/// The corpus's playwright pages measured besides the readability pages (18 pages in all).
const PLAYWRIGHT_PAGES: [&str; 6] = [
    "playwright/evals/fill-form.html",
    "playwright/input/select.html",
    "playwright/input/checkbox.html",
    "playwright/shadow.html",
    "playwright/deep-shadow.html",
    "playwright/frames/nested-frames.html",
];

/// The page of the start-to-first-observation figure (the browser bench's cold-start page).
const START_PAGE: &str = "playwright/input/button.html";
/// A second small page, loaded without forge's navigate to show the floor under it.
const FLOOR_PAGE: &str = "playwright/input/checkbox.html";

/// How often the memory sampler reads the tree, and the longest it runs.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
const SAMPLER_LIMIT: Duration = Duration::from_secs(30 * 60);

struct Engine {
    kind: EngineKind,
    binary: PathBuf,
}

/// The engine's process tree (see the top of the file).
fn tree(root: i32, profile: Option<&Path>) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut set: HashSet<i32> = HashSet::new();
    for pid in all_pids() {
        let Some(f) = stat_fields(pid) else { continue };
        let ppid: i32 = f.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let pgrp: i32 = f.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
        children.entry(ppid).or_default().push(pid);
        if pgrp == root {
            set.insert(pid);
        }
    }
    // Each pid is visited once (`seen`), so the walk ends; the cap bounds it all the same.
    let mut seen: HashSet<i32> = HashSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if seen.len() > 100_000 {
            break;
        }
        if seen.insert(p) {
            todo.extend(children.get(&p).into_iter().flatten().copied());
        }
    }
    set.extend(seen);
    if let Some(dir) = profile.and_then(Path::to_str).filter(|d| !d.is_empty()) {
        set.extend(processes_mentioning(dir));
    }
    let mut v: Vec<i32> = set.into_iter().filter(|p| *p > 0).collect();
    v.sort();
    v
}

/// CPU and memory of a tree at one moment.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    /// utime+stime of each live process plus cutime+cstime (its reaped children), clock ticks.
    ticks: u64,
    rss_kb: u64,
    pss_kb: u64,
    procs: usize,
}

fn usage(root: i32, profile: Option<&Path>, with_pss: bool) -> Usage {
    let mut u = Usage::default();
    for pid in tree(root, profile) {
        let Some(f) = stat_fields(pid) else { continue };
        // Fields 14-17 of /proc/<pid>/stat (utime, stime, cutime, cstime); index 0 is field 3.
        u.ticks += (11..=14)
            .filter_map(|i| f.get(i).and_then(|s| s.parse::<u64>().ok()))
            .sum::<u64>();
        if f.first().map(String::as_str) == Some("Z") {
            continue;
        }
        u.procs += 1;
        u.rss_kb += proc_kb(pid, "status", "VmRSS:");
        if with_pss {
            u.pss_kb += proc_kb(pid, "smaps_rollup", "Pss:");
        }
    }
    u
}

fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Peaks seen by a sampler thread that reads the tree every [`SAMPLE_EVERY`] until stopped.
#[derive(Debug, Default, Clone, Copy)]
struct Peaks {
    pss_kb: u64,
    rss_kb: u64,
    procs: usize,
    samples: usize,
}

/// The tree a sampler watches: its root pid and profile dir, once launched.
type Target = Arc<Mutex<Option<(i32, Option<PathBuf>)>>>;

struct Sampler {
    target: Target,
    peaks: Arc<Mutex<Peaks>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start() -> Sampler {
        let target: Target = Arc::new(Mutex::new(None));
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, p, s) = (target.clone(), peaks.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let began = Instant::now();
            while !s.load(Ordering::SeqCst) && began.elapsed() < SAMPLER_LIMIT {
                let tgt = t.lock().map(|g| g.clone()).unwrap_or(None);
                if let Some((root, profile)) = tgt {
                    let u = usage(root, profile.as_deref(), true);
                    if let Ok(mut pk) = p.lock() {
                        pk.pss_kb = pk.pss_kb.max(u.pss_kb);
                        pk.rss_kb = pk.rss_kb.max(u.rss_kb);
                        pk.procs = pk.procs.max(u.procs);
                        pk.samples += 1;
                    }
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        Sampler {
            target,
            peaks,
            stop,
            thread: Some(thread),
        }
    }

    fn watch(&self, root: i32, profile: Option<PathBuf>) {
        if let Ok(mut g) = self.target.lock() {
            *g = Some((root, profile));
        }
    }

    fn finish(mut self) -> Peaks {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks.lock().map(|p| *p).unwrap_or_default()
    }
}

fn manager_for(
    e: &Engine,
    addr: std::net::SocketAddr,
    proxy: &ProxyHandle,
    log: forge_browser::RefusalLog,
    tmp: &Path,
    ns: Option<NsKind>,
) -> Arc<BrowserManager> {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.engine = e.kind;
    cfg.binary = Some(e.binary.clone());
    cfg.confine = ns.map(|k| Confiner::new(proxy.entry(), k));
    Arc::new(BrowserManager::new(cfg).with_refusals(log))
}

/// Element lines and text characters of an observation (what differs between engines).
fn shape(obs: &str) -> (usize, usize) {
    let (head, text) = obs.split_once("\ntext:").unwrap_or((obs, ""));
    let elements = head
        .split_once("elements (")
        .map(|(_, rest)| {
            rest.lines()
                .skip(1)
                .filter(|l| !l.contains("(browser_state with"))
                .count()
        })
        .unwrap_or(0);
    (elements, text.trim().chars().count())
}

/// Read: the page gave an observation with at least one element or some text.
fn readable(obs: &str) -> bool {
    let (elements, text) = shape(obs);
    elements > 0 || text > 0
}

/// The bytes a script would add to every launch: `#!` at the start of the binary.
fn is_script(p: &Path) -> bool {
    std::fs::read(p)
        .map(|b| b.starts_with(b"#!"))
        .unwrap_or(false)
}

struct Start {
    ms: Vec<f64>,
    launch_ms: Vec<f64>,
    session_ms: Vec<f64>,
    navigate_ms: Vec<f64>,
    observe_ms: Vec<f64>,
    bare_load_ms: Vec<f64>,
    library_ms: Vec<f64>,
    cpu_ms: Vec<f64>,
    failed: Vec<String>,
}

struct PageRow {
    page: String,
    nav_ms: f64,
    cpu_ms: f64,
    /// The `browser_state` result, or why there is none.
    result: Result<String, String>,
}

struct Pass {
    rows: Vec<PageRow>,
    wall_ms: f64,
    cpu_ms: f64,
    peaks: Peaks,
    launches: u64,
}

async fn start_once(
    e: &Engine,
    server: &Site,
    net: &Net<'_>,
    tmp: &Path,
    files: &Path,
    start: &mut Start,
) {
    let m = manager_for(e, net.addr, net.proxy, net.log.clone(), tmp, net.ns);
    let ctx = ToolContext::new("start", files);
    // The same path as a first browser_navigate (launch, session, navigate + observe), in steps
    // so that each is timed; then one more observation on its own.
    let t = Instant::now();
    let launched = m.launch_for("start").await.map(|_| ms(t.elapsed()));
    let t1 = Instant::now();
    let session = m.session("start").await.map(|_| ms(t1.elapsed()));
    let t2 = Instant::now();
    let r = tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url(&format!("/{START_PAGE}"))}))
        .await;
    let navigated = ms(t2.elapsed());
    let took = ms(t.elapsed());
    match (launched, session, r) {
        (Ok(l), Ok(s), Ok(out)) if readable(fenced(&out.text)) => {
            start.ms.push(took);
            start.launch_ms.push(l);
            start.session_ms.push(s);
            start.navigate_ms.push(navigated);
            if let Some(pid) = m.browser_pid().await {
                let profile = m.profile_dir().await;
                let u = usage(pid as i32, profile.as_deref(), false);
                start.cpu_ms.push(u.ticks as f64 / ticks_per_sec() * 1000.0);
            }
            let t3 = Instant::now();
            if tool(&m, "browser_state")
                .execute(&ctx, json!({}))
                .await
                .is_ok()
            {
                start.observe_ms.push(ms(t3.elapsed()));
            }
            // Under forge's navigate: a bare Page.navigate of another small page until its
            // document is complete (polled in the page's own world), then the page library
            // (`observe.js`, about 100 KB) evaluated in a new isolated world, as forge installs it
            // in every new document before the document's first observation.
            if let Some(page) = m.active_page("start").await {
                let url = server.url(&format!("/{FLOOR_PAGE}"));
                let t4 = Instant::now();
                let loaded = tokio::time::timeout(Duration::from_secs(10), async {
                    page.execute(NavigateParams::new(url)).await.ok()?;
                    // At most 10 s (the timeout) at 10 ms a poll.
                    loop {
                        let v = page
                            .execute(
                                EvaluateParams::builder()
                                    .expression("document.readyState + ' ' + location.pathname")
                                    .return_by_value(true)
                                    .build()
                                    .ok()?,
                            )
                            .await
                            .ok()?;
                        let v = v.result.result.value.clone().unwrap_or_default();
                        let v = v.as_str().unwrap_or_default();
                        if v.starts_with("complete") && v.ends_with(FLOOR_PAGE) {
                            return Some(());
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
                .await;
                if let Ok(Some(())) = loaded {
                    start.bare_load_ms.push(ms(t4.elapsed()));
                    let t5 = Instant::now();
                    if install_library(&page).await.is_some() {
                        start.library_ms.push(ms(t5.elapsed()));
                    }
                }
            }
        }
        (Err(err), _, _) | (_, Err(err), _) => start.failed.push(err.to_string()),
        (_, _, Ok(out)) => start
            .failed
            .push(format!("empty observation: {}", out.text)),
        (_, _, Err(err)) => start.failed.push(err.to_string()),
    }
    m.shutdown().await;
}

struct Net<'a> {
    addr: std::net::SocketAddr,
    proxy: &'a ProxyHandle,
    log: forge_browser::RefusalLog,
    ns: Option<NsKind>,
}

async fn corpus_pass(
    e: &Engine,
    server: &Site,
    pages: &[String],
    net: &Net<'_>,
    tmp: &Path,
    files: &Path,
) -> Pass {
    let m = manager_for(e, net.addr, net.proxy, net.log.clone(), tmp, net.ns);
    let ctx = ToolContext::new("corpus", files);
    let nav = tool(&m, "browser_navigate");
    let state = tool(&m, "browser_state");
    let sampler = Sampler::start();
    let began = Instant::now();
    let tps = ticks_per_sec();
    // Launch first, so the sampler watches the tree from its start.
    let mut root = match m.launch_for("corpus").await {
        Ok(_) => m.browser_pid().await.map(|p| p as i32),
        Err(err) => {
            eprintln!("{}: launch failed: {err}", e.kind);
            None
        }
    };
    if let Some(pid) = root {
        sampler.watch(pid, m.profile_dir().await);
    }
    let mut profile = m.profile_dir().await;
    let mut rows = Vec::new();
    for page in pages {
        let before = root
            .map(|r| usage(r, profile.as_deref(), false).ticks)
            .unwrap_or(0);
        let t = Instant::now();
        let r = nav
            .execute(&ctx, json!({"url": server.url(&format!("/{page}"))}))
            .await;
        let nav_ms = ms(t.elapsed());
        let result = match r {
            Err(err) => Err(err.to_string()),
            Ok(_) => state
                .execute(&ctx, json!({}))
                .await
                .map(|o| o.text)
                .map_err(|err| format!("browser_state: {err}")),
        };
        // A crash relaunches the engine: follow the new process.
        let now = m.browser_pid().await.map(|p| p as i32);
        if now != root {
            profile = m.profile_dir().await;
            if let Some(pid) = now {
                sampler.watch(pid, profile.clone());
            }
        }
        let after = now
            .map(|r| usage(r, profile.as_deref(), false).ticks)
            .unwrap_or(0);
        let cpu_ms = if now == root {
            after.saturating_sub(before) as f64 / tps * 1000.0
        } else {
            f64::NAN
        };
        root = now;
        rows.push(PageRow {
            page: page.clone(),
            nav_ms,
            cpu_ms,
            result,
        });
    }
    let wall_ms = ms(began.elapsed());
    let cpu_ms = root
        .map(|r| usage(r, profile.as_deref(), false).ticks as f64 / tps * 1000.0)
        .unwrap_or(f64::NAN);
    let peaks = sampler.finish();
    let launches = m.launch_count();
    m.shutdown().await;
    Pass {
        rows,
        wall_ms,
        cpu_ms,
        peaks,
        launches,
    }
}

/// The page library, as forge evaluates it in each new document's isolated world.
const LIBRARY: &str = include_str!("../src/observe/observe.js");

/// Evaluate the page library in a new isolated world of the page's main frame.
async fn install_library(page: &chromiumoxide::Page) -> Option<()> {
    let frame = observe::main_frame(page).await.ok()?;
    let world = page
        .execute(
            CreateIsolatedWorldParams::builder()
                .frame_id(frame)
                .world_name("forge-bench")
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    let r = page
        .execute(
            EvaluateParams::builder()
                .expression(LIBRARY)
                .context_id(world.result.execution_context_id)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    r.result.exception_details.is_none().then_some(())
}

fn slug(page: &str) -> String {
    page.trim_end_matches("/source.html")
        .trim_end_matches(".html")
        .replace('/', "_")
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(0.0, f64::max);
    if v.is_empty() {
        "-".into()
    } else {
        format!("{lo:.0}-{hi:.0}")
    }
}

fn main() {
    let corpus = corpus_dir();
    let Some(chromium) = forge_testkit::require_browser("engines bench") else {
        return;
    };
    let Some(lightpanda) = forge_testkit::require_lightpanda("engines bench") else {
        return;
    };
    if !corpus.join("readability").is_dir() {
        eprintln!(
            "SKIPPED engines bench: no corpus at {} (pass its path)",
            corpus.display()
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let engines = [
        Engine {
            kind: EngineKind::Chromium,
            binary: chromium,
        },
        Engine {
            kind: EngineKind::Lightpanda,
            binary: lightpanda,
        },
    ];
    rt.block_on(run(&corpus, &engines));
}

async fn run(corpus: &Path, engines: &[Engine; 2]) {
    let server = Site::serve(static_server_handler(corpus.to_path_buf()));
    let (addr, proxy_handle, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let (ns, confinement) = match forge_egress::confine::availability() {
        Availability::Namespace(k) => (Some(k), format!("confined ({k:?} namespace)")),
        Availability::ProxyOnly(why) => (None, format!("proxy only ({why})")),
    };
    let net = Net {
        addr,
        proxy: &proxy_handle,
        log,
        ns,
    };
    let tmp = tempfile::tempdir().expect("tmp");
    let files = tmp.path().join("files");
    let reps: usize = std::env::var("FORGE_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .clamp(1, 50);
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut pages: Vec<String> = readability_pages(corpus)
        .into_iter()
        .map(|n| format!("readability/{n}/source.html"))
        .collect();
    pages.extend(PLAYWRIGHT_PAGES.iter().map(|p| p.to_string()));

    // (a) Start to first observation, engines alternating (the first of each pair swaps).
    let mut starts: Vec<Start> = (0..2)
        .map(|_| Start {
            ms: Vec::new(),
            launch_ms: Vec::new(),
            session_ms: Vec::new(),
            navigate_ms: Vec::new(),
            observe_ms: Vec::new(),
            bare_load_ms: Vec::new(),
            library_ms: Vec::new(),
            cpu_ms: Vec::new(),
            failed: Vec::new(),
        })
        .collect();
    for rep in 0..reps {
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            start_once(
                &engines[i],
                &server,
                &net,
                tmp.path(),
                &files,
                &mut starts[i],
            )
            .await;
        }
    }

    // (b) and (c): the corpus, one session per engine.
    let mut passes = Vec::new();
    for e in engines {
        passes.push(corpus_pass(e, &server, &pages, &net, tmp.path(), &files).await);
    }
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    if let Some(dir) = std::env::var_os("FORGE_BENCH_DUMP").map(PathBuf::from) {
        for (e, pass) in engines.iter().zip(&passes) {
            let d = dir.join(e.kind.name());
            let _ = std::fs::create_dir_all(&d);
            for r in &pass.rows {
                let body = match &r.result {
                    Ok(t) => t.clone(),
                    Err(err) => format!("ERROR {err}"),
                };
                let _ = std::fs::write(d.join(format!("{}.txt", slug(&r.page))), body);
            }
        }
    }

    println!("## Lightpanda against Chromium on the corpus (engines bench)\n");
    for e in engines {
        let note = if is_script(&e.binary) {
            " (a script: its interpreter's start-up is part of every launch)"
        } else {
            ""
        };
        println!("- {}: `{}`{note}", e.kind, e.binary.display());
    }
    println!("- network: forge's egress proxy, {confinement}");
    println!(
        "- machine load (/proc/loadavg) before: {}; after: {}",
        load_before.trim(),
        load_after.trim()
    );

    println!("\n### Start to first observation ({reps} runs each, `{START_PAGE}`)\n");
    println!("| engine | median ms | spread ms | launch (median ms) | session | navigate + observation | a second observation alone | engine CPU to first observation (median ms) | failures |\n|---|---|---|---|---|---|---|---|---|");
    for (e, s) in engines.iter().zip(&starts) {
        println!(
            "| {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
            e.kind,
            median(&mut s.ms.clone()),
            spread(&s.ms),
            median(&mut s.launch_ms.clone()),
            median(&mut s.session_ms.clone()),
            median(&mut s.navigate_ms.clone()),
            median(&mut s.observe_ms.clone()),
            median(&mut s.cpu_ms.clone()),
            s.failed.len()
        );
    }
    println!("\nUnder forge's navigate (then, in the same session, `{FLOOR_PAGE}`): a bare `Page.navigate` until the document is complete, and the page library (observe.js) evaluated in a new isolated world, as forge installs it in each new document (median ms):\n");
    println!("| engine | bare load | page library install |\n|---|---|---|");
    for (e, s) in engines.iter().zip(&starts) {
        println!(
            "| {} | {:.0} | {:.0} |",
            e.kind,
            median(&mut s.bare_load_ms.clone()),
            median(&mut s.library_ms.clone())
        );
    }
    for (e, s) in engines.iter().zip(&starts) {
        for f in &s.failed {
            println!(
                "\n{} start failed: {}",
                e.kind,
                f.lines().next().unwrap_or("")
            );
        }
    }
    let start_ratio = median(&mut starts[0].ms.clone()) / median(&mut starts[1].ms.clone());

    println!(
        "\n### The {} corpus pages, one session per engine\n",
        pages.len()
    );
    println!("| page | Chromium nav ms | Lightpanda nav ms | Chromium CPU ms | Lightpanda CPU ms | Chromium obs B (elements, text chars) | Lightpanda obs B (elements, text chars) | ratio |\n|---|---|---|---|---|---|---|---|");
    let (mut both_c, mut both_l, mut ratios) = (0usize, 0usize, Vec::new());
    let mut unread: Vec<String> = Vec::new();
    for i in 0..pages.len() {
        let (c, l) = (&passes[0].rows[i], &passes[1].rows[i]);
        let cell = |r: &PageRow| match &r.result {
            Ok(t) if readable(fenced(t)) => {
                let (el, tx) = shape(fenced(t));
                format!("{} ({el}, {tx})", t.len())
            }
            Ok(_) => "empty".to_string(),
            Err(err) => format!(
                "error: {}",
                err.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect::<String>()
            ),
        };
        let read = |r: &PageRow| matches!(&r.result, Ok(t) if readable(fenced(t)));
        let ratio = match (&c.result, &l.result) {
            (Ok(ct), Ok(lt)) if read(c) && read(l) => {
                both_c += ct.len();
                both_l += lt.len();
                let r = lt.len() as f64 / ct.len().max(1) as f64;
                ratios.push(r);
                format!("{r:.2}")
            }
            _ => {
                for (e, r) in engines.iter().zip([c, l]) {
                    if !read(r) {
                        unread.push(format!("{} on {}", e.kind, slug(&r.page)));
                    }
                }
                "-".into()
            }
        };
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {ratio} |",
            slug(&c.page),
            c.nav_ms,
            l.nav_ms,
            c.cpu_ms,
            l.cpu_ms,
            cell(c),
            cell(l)
        );
    }
    println!("\n| engine | pass wall s | pass CPU s (tree, reaped children included) | peak PSS MB (summed over the tree) | peak RSS MB (summed) | most processes | launches | memory samples |\n|---|---|---|---|---|---|---|---|");
    for (e, p) in engines.iter().zip(&passes) {
        println!(
            "| {} | {:.1} | {:.2} | {:.0} | {:.0} | {} | {} | {} |",
            e.kind,
            p.wall_ms / 1000.0,
            p.cpu_ms / 1000.0,
            p.peaks.pss_kb as f64 / 1024.0,
            p.peaks.rss_kb as f64 / 1024.0,
            p.peaks.procs,
            p.launches,
            p.peaks.samples
        );
    }
    let mem_ratio = passes[0].peaks.pss_kb as f64 / passes[1].peaks.pss_kb.max(1) as f64;
    let rss_ratio = passes[0].peaks.rss_kb as f64 / passes[1].peaks.rss_kb.max(1) as f64;
    let cpu_ratio = passes[0].cpu_ms / passes[1].cpu_ms;
    let byte_ratio = both_l as f64 / both_c.max(1) as f64;
    let within = ratios.iter().filter(|r| (**r - 1.0).abs() <= 0.10).count();
    println!(
        "\nunread (error or empty): {}",
        if unread.is_empty() {
            "none".to_string()
        } else {
            unread.join(", ")
        }
    );
    println!("\n### Goals (issue 26)\n");
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    println!(
        "- first observation {start_ratio:.1}x faster on Lightpanda (goal >= 5x): {}",
        verdict(start_ratio >= 5.0)
    );
    println!(
        "- peak memory {mem_ratio:.1}x less on Lightpanda by PSS ({rss_ratio:.1}x by summed RSS) (goal >= 5x): {}",
        verdict(mem_ratio >= 5.0)
    );
    println!("- CPU over the pass {cpu_ratio:.1}x less on Lightpanda (no goal)");
    println!(
        "- observation bytes on the {} pages both read: Lightpanda {} B against Chromium {} B, {:.2}x; {} of {} pages within 10% (goal: within 10%): {}",
        ratios.len(),
        both_l,
        both_c,
        byte_ratio,
        within,
        ratios.len(),
        verdict((byte_ratio - 1.0).abs() <= 0.10)
    );
}
