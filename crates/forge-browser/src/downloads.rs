//! Downloads: every session's downloads land in its workspace (`downloads/` in the files dir of
//! the call), fetched by Chromium's own network stack and so through the session's egress proxy.
//!
//! Per browser context, `Browser.setDownloadBehavior {allowAndName, eventsEnabled}` makes
//! Chromium write each download as `downloads/.incoming/<guid>`; one watcher per browser
//! ([`watch`]) follows `Browser.downloadWillBegin`/`downloadProgress`, finds the session (the
//! frame's target gives the browser context), enforces the caps ([`DownloadLimits`]: too large or
//! too many is cancelled with `Browser.cancelDownload` and its partial file removed) and, when a
//! download completes, moves it under a sanitised name ([`safe_name`]; a collision gets a
//! suffix; hard-linked, so an existing entry or a planted symlink is never replaced or followed).
//! The tool call during which it happened reports it (`downloaded: invoice.pdf (48 KB,
//! application/pdf)`), with the file in its data's `files` list, which the runtime captures as
//! artifacts. Nothing downloaded is ever opened or run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, CancelDownloadParams, DownloadProgressState, EventDownloadProgress,
    EventDownloadWillBegin, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
use chromiumoxide::listeners::EventStream;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::error::BrowserError;

/// What the download watcher needs of a running browser (implemented by `session::Running`;
/// a trait so that this module does not import the session's).
pub(crate) trait Link: Send + Sync + 'static {
    /// The browser's CDP handle.
    fn browser(&self) -> &chromiumoxide::Browser;
    /// Every session's downloads on this browser.
    fn registry(&self) -> &Registry;
}

/// `f` within `limit`, a timeout as a CDP error.
async fn with_timeout<T>(
    limit: Duration,
    f: impl std::future::Future<Output = chromiumoxide::Result<T>>,
) -> Result<T, BrowserError> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(BrowserError::Cdp(format!(
            "no answer from the browser within {limit:?}"
        ))),
    }
}

pub use crate::config::DownloadLimits;

/// The folder under the files dir that downloads land in.
pub const DOWNLOADS_DIR: &str = "downloads";
/// Where Chromium writes a download while it runs (inside [`DOWNLOADS_DIR`]).
const INCOMING_DIR: &str = ".incoming";
/// Longest file name kept, in characters (the extension is kept).
const MAX_NAME_CHARS: usize = 120;

/// What a tool call reports about one download.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Report {
    /// Finished and moved into the workspace.
    Done {
        filename: String,
        path: PathBuf,
        size: u64,
        mime: &'static str,
    },
    /// Refused, cancelled or failed; nothing kept.
    Failed { name: String, why: String },
}

/// A download in flight.
#[derive(Debug, Clone)]
struct Active {
    name: String,
    received: u64,
    total: u64,
}

#[derive(Default)]
struct Inner {
    /// `files_dir/downloads` and its `.incoming` while downloads are on.
    dir: Option<PathBuf>,
    /// Downloads this session started (counted against `max_files`).
    started: usize,
    /// Downloads that began, kept or cancelled at once over `max_files`.
    begun: usize,
    active: HashMap<String, Active>,
    reports: Vec<Report>,
    /// The last finished download that is a PDF (`browser_extract {page: N}` reads it).
    last_pdf: Option<PathBuf>,
}

/// One session's downloads.
#[derive(Default)]
pub(crate) struct SessionDownloads {
    inner: StdMutex<Inner>,
    changed: tokio::sync::Notify,
}

impl SessionDownloads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many downloads began so far, kept or cancelled (to tell which began during a call).
    pub(crate) fn begun(&self) -> usize {
        self.lock().begun
    }

    /// Resolves once a download of this session began after `before` (callers bound the time).
    pub(crate) async fn begun_after(&self, before: usize) {
        // Bounded in count; each round waits for a change (the caller bounds the time).
        for _ in 0..100_000 {
            let changed = self.changed.notified();
            if self.lock().begun > before {
                return;
            }
            changed.await;
        }
    }

    /// Wait (at most `max`) for a download of this session to begin after `before`, while
    /// none is being assigned to a session; whether one began.
    pub(crate) async fn begun_within(&self, reg: &Registry, before: usize, max: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max;
        // Bounded: each round waits for a change or the deadline.
        for _ in 0..10_000 {
            let mine = self.changed.notified();
            let any = reg.began.notified();
            if self.begun() > before {
                return true;
            }
            let waiting = reg.unassigned.load(std::sync::atomic::Ordering::SeqCst) > 0;
            if !waiting && tokio::time::Instant::now() >= deadline {
                return false;
            }
            // A download being assigned is waited for past the deadline (bounded by 5 s: the
            // target lookup's own limit).
            let until = if waiting {
                deadline.max(tokio::time::Instant::now() + Duration::from_millis(50))
            } else {
                deadline
            };
            tokio::select! {
                _ = mine => {}
                _ = any => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
        false
    }

    /// Wait (at most `max`) until no download is in flight, when one began after `before`.
    pub(crate) async fn settle(&self, before: usize, max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        // Bounded: each round waits for a change or the deadline.
        for _ in 0..10_000 {
            let notified = self.changed.notified();
            {
                let g = self.lock();
                if g.begun <= before || g.active.is_empty() {
                    return;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Wait (at most `max`) until no download of this session is running: `None` when none
    /// was, else whether they all ended in time.
    pub(crate) async fn settle_all(&self, max: Duration) -> Option<bool> {
        if self.lock().active.is_empty() {
            return None;
        }
        let deadline = tokio::time::Instant::now() + max;
        // Bounded: each round waits for a change or the deadline.
        for _ in 0..10_000 {
            let notified = self.changed.notified();
            if self.lock().active.is_empty() {
                return Some(true);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Some(self.lock().active.is_empty());
            }
        }
        Some(false)
    }

    /// The finished or failed downloads not reported yet, and the ones still running (as lines).
    pub(crate) fn take(&self) -> (Vec<Report>, Vec<String>) {
        let mut g = self.lock();
        let running = g
            .active
            .values()
            .map(|a| {
                let of = if a.total > 0 {
                    format!(" of {}", human(a.total))
                } else {
                    String::new()
                };
                format!(
                    "downloading: {} ({}{of} so far; browser_state with wait_for {{\"download\": true}} reports its end)",
                    a.name,
                    human(a.received)
                )
            })
            .collect();
        (std::mem::take(&mut g.reports), running)
    }

    /// The last finished download that is a PDF, if any.
    pub(crate) fn last_pdf(&self) -> Option<PathBuf> {
        self.lock().last_pdf.clone()
    }

    /// `guid` ended as `r`: no longer running and reported, under one lock (a call that
    /// sees no download running takes its reports at once; a gap between the two lost the
    /// report from the call that started the download).
    fn end(&self, guid: &str, r: Report) {
        let pdf = match &r {
            Report::Done { path, .. } if is_pdf(path) => Some(path.clone()),
            _ => None,
        };
        {
            let mut g = self.lock();
            if pdf.is_some() {
                g.last_pdf = pdf;
            }
            g.active.remove(guid);
            g.reports.push(r);
        }
        self.changed.notify_waiters();
    }
}

/// Every session's downloads on one browser, by browser context and by download guid.
#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) limits: DownloadLimits,
    /// Downloads whose `downloadWillBegin` arrived and whose session is being looked up.
    unassigned: std::sync::atomic::AtomicUsize,
    /// Told when a download began anywhere on the browser.
    began: tokio::sync::Notify,
    by_context: StdMutex<HashMap<String, Arc<SessionDownloads>>>,
    by_guid: StdMutex<HashMap<String, Arc<SessionDownloads>>>,
}

impl Registry {
    pub(crate) fn new(limits: DownloadLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Whether a download that began is still being matched to its session.
    pub(crate) fn assigning(&self) -> bool {
        self.unassigned.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    pub(crate) fn add(&self, context: &BrowserContextId, d: Arc<SessionDownloads>) {
        self.by_context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(context.as_ref().to_string(), d);
    }

    pub(crate) fn remove(&self, context: &BrowserContextId) {
        self.by_context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(context.as_ref());
    }

    fn for_context(&self, context: &str) -> Option<Arc<SessionDownloads>> {
        self.by_context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(context)
            .cloned()
    }

    fn for_guid(&self, guid: &str) -> Option<Arc<SessionDownloads>> {
        self.by_guid
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(guid)
            .cloned()
    }

    /// The session whose `.incoming` dir holds `guid`'s file (a download from a frame that is
    /// not a target of its own).
    fn probe(&self, guid: &str) -> Option<Arc<SessionDownloads>> {
        let all: Vec<Arc<SessionDownloads>> = self
            .by_context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        all.into_iter().find(|d| {
            d.lock().dir.as_ref().is_some_and(|dir| {
                incoming_files(&dir.join(INCOMING_DIR), guid)
                    .next()
                    .is_some()
            })
        })
    }
}

/// Turn downloads on for `context` into `files_dir/downloads` (a real directory, created if
/// missing; a symlink there is refused), unless they already go there.
pub(crate) async fn enable(
    browser: &chromiumoxide::Browser,
    context: &BrowserContextId,
    d: &SessionDownloads,
    files_dir: &Path,
) -> Result<(), BrowserError> {
    let dir = files_dir.join(DOWNLOADS_DIR);
    if d.lock().dir.as_deref() == Some(dir.as_path()) {
        return Ok(());
    }
    let incoming = dir.join(INCOMING_DIR);
    for p in [&dir, &incoming] {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(BrowserError::Downloads(format!(
                    "{} exists and is not a directory (remove it)",
                    p.display()
                )))
            }
            Err(_) => std::fs::create_dir_all(p).map_err(|e| {
                BrowserError::Downloads(format!("cannot create {}: {e}", p.display()))
            })?,
        }
    }
    let params = SetDownloadBehaviorParams::builder()
        .behavior(SetDownloadBehaviorBehavior::AllowAndName)
        .browser_context_id(context.clone())
        .download_path(incoming.to_string_lossy().into_owned())
        .events_enabled(true)
        .build()
        .map_err(BrowserError::Cdp)?;
    with_timeout(Duration::from_secs(10), browser.execute(params)).await?;
    d.lock().dir = Some(dir);
    Ok(())
}

/// The browser's download event streams (subscribed before the watcher starts).
pub(crate) struct Streams {
    begin: EventStream<EventDownloadWillBegin>,
    progress: EventStream<EventDownloadProgress>,
}

pub(crate) async fn subscribe(browser: &chromiumoxide::Browser) -> Result<Streams, BrowserError> {
    Ok(Streams {
        begin: browser.event_listener::<EventDownloadWillBegin>().await?,
        progress: browser.event_listener::<EventDownloadProgress>().await?,
    })
}

/// Follow the browser's downloads until it goes away.
pub(crate) async fn watch<L: Link>(running: Weak<L>, mut s: Streams) {
    // Names and URLs of downloads whose session is not known yet.
    let mut pending: HashMap<String, String> = HashMap::new();
    loop {
        tokio::select! {
            // A download's begin is always taken before its progress: both streams may hold
            // events, and a progress (even its `completed`) read first would find no download
            // to update and be lost, leaving the download "running" until the call's limit.
            biased;
            e = s.begin.next() => {
                let Some(e) = e else { return };
                let Some(r) = running.upgrade() else { return };
                r.registry().unassigned.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                r.registry().began.notify_waiters();
                begin(&*r, &e, &mut pending).await;
                r.registry().unassigned.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                r.registry().began.notify_waiters();
            }
            e = s.progress.next() => {
                let Some(e) = e else { return };
                let Some(r) = running.upgrade() else { return };
                progress(&*r, &e, &mut pending).await;
            }
        }
    }
}

async fn begin(r: &impl Link, e: &EventDownloadWillBegin, pending: &mut HashMap<String, String>) {
    let reg = r.registry();
    let name = safe_name(&e.suggested_filename, "download");
    // The frame's target (a tab, an out-of-process frame) names the browser context.
    let targets = with_timeout(
        Duration::from_secs(5),
        r.browser().execute(GetTargetsParams::default()),
    )
    .await;
    let context = targets.ok().and_then(|t| {
        t.result
            .target_infos
            .iter()
            .find(|i| i.target_id.as_ref() == e.frame_id.as_ref())
            .and_then(|i| {
                i.browser_context_id
                    .as_ref()
                    .map(|c| c.as_ref().to_string())
            })
    });
    let Some(d) = context.and_then(|c| reg.for_context(&c)) else {
        pending.insert(e.guid.clone(), name);
        return;
    };
    start(r, &e.guid, name, d).await;
}

/// Count a download against its session's cap, cancelling it past the cap.
async fn start(r: &impl Link, guid: &str, name: String, d: Arc<SessionDownloads>) {
    let max = r.registry().limits.max_files;
    // Counted and, past the cap, reported under one lock: a call that sees the download begun
    // and none running takes its reports at once, so a report pushed only after the cancel's
    // round trip was at times missing from the call that started the download.
    let over = {
        let mut g = d.lock();
        g.begun += 1;
        if g.started >= max {
            g.reports.push(Report::Failed {
                name,
                why: format!(
                    "cancelled: this session already started {max} downloads (forge.yaml browser.downloads.max_files)"
                ),
            });
            true
        } else {
            g.started += 1;
            g.active.insert(
                guid.to_string(),
                Active {
                    name: name.clone(),
                    received: 0,
                    total: 0,
                },
            );
            false
        }
    };
    r.registry()
        .by_guid
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(guid.to_string(), d.clone());
    d.changed.notify_waiters();
    if over {
        cancel(r, guid).await;
        remove_partial(&d, guid);
    }
}

async fn progress(r: &impl Link, e: &EventDownloadProgress, pending: &mut HashMap<String, String>) {
    let reg = r.registry();
    let d = match reg.for_guid(&e.guid) {
        Some(d) => d,
        None => {
            // A download from a frame without a target of its own: its file tells the session.
            let Some(name) = pending.get(&e.guid).cloned() else {
                return;
            };
            let Some(d) = reg.probe(&e.guid) else {
                if !matches!(e.state, DownloadProgressState::InProgress) {
                    pending.remove(&e.guid);
                }
                return;
            };
            pending.remove(&e.guid);
            start(r, &e.guid, name, d.clone()).await;
            d
        }
    };
    let max = reg.limits.max_bytes;
    // The name is taken out first: a guard in the match's scrutinee would live through the
    // arms, and `remove_partial` locks again (a self-deadlock that hung the caller's call).
    let known = d.lock().active.get(&e.guid).map(|a| a.name.clone());
    let name = match known {
        Some(name) => name,
        // Already cancelled by forge (over a cap): Chromium may have written more before it
        // took the cancel in, so its partial file goes again when it says it stopped.
        None => {
            if !matches!(e.state, DownloadProgressState::InProgress) {
                remove_partial(&d, &e.guid);
                forget(reg, &e.guid);
            }
            return;
        }
    };
    let received = e.received_bytes.max(0.0) as u64;
    let total = e.total_bytes.max(0.0) as u64;
    let too_big = received > max || total > max;
    match e.state {
        DownloadProgressState::InProgress if too_big => {
            cancel(r, &e.guid).await;
            finish_failed(&d, &e.guid, name, too_big_message(received.max(total), max));
            // Chromium may create or keep writing the file a moment after the cancel: sweep
            // its partial file away for a while (bounded: 50 rounds of 100 ms).
            let (d2, guid) = (d.clone(), e.guid.clone());
            tokio::spawn(async move {
                for _ in 0..50 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    remove_partial(&d2, &guid);
                }
            });
        }
        DownloadProgressState::InProgress => {
            if let Some(a) = d.lock().active.get_mut(&e.guid) {
                a.received = received;
                a.total = total;
            }
        }
        DownloadProgressState::Completed => {
            let rep = complete(&d, &e.guid, &name, max);
            d.end(&e.guid, rep);
        }
        DownloadProgressState::Canceled => {
            finish_failed(
                &d,
                &e.guid,
                name,
                "failed: the browser cancelled it (a refused host, a network error or the page)"
                    .into(),
            );
        }
    }
    if !matches!(e.state, DownloadProgressState::InProgress) {
        forget(reg, &e.guid);
    }
}

fn forget(reg: &Registry, guid: &str) {
    reg.by_guid
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(guid);
}

fn too_big_message(size: u64, max: u64) -> String {
    format!(
        "cancelled: larger than forge.yaml browser.downloads.max_bytes ({} > {}); nothing was kept",
        human(size),
        human(max)
    )
}

fn finish_failed(d: &SessionDownloads, guid: &str, name: String, why: String) {
    remove_partial(d, guid);
    d.end(guid, Report::Failed { name, why });
}

async fn cancel(r: &impl Link, guid: &str) {
    let p = CancelDownloadParams::new(guid.to_string());
    let _ = with_timeout(Duration::from_secs(5), r.browser().execute(p)).await;
}

/// The files Chromium may have written for `guid` in `incoming` (`<guid>`, `<guid>.crdownload`).
fn incoming_files(incoming: &Path, guid: &str) -> impl Iterator<Item = PathBuf> {
    let names = [guid.to_string(), format!("{guid}.crdownload")];
    let incoming = incoming.to_path_buf();
    names
        .into_iter()
        .map(move |n| incoming.join(n))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
}

fn remove_partial(d: &SessionDownloads, guid: &str) {
    let Some(dir) = d.lock().dir.clone() else {
        return;
    };
    for p in incoming_files(&dir.join(INCOMING_DIR), guid) {
        let _ = std::fs::remove_file(p);
    }
}

/// Move a finished download from `.incoming/<guid>` to `downloads/<safe name>`.
fn complete(d: &SessionDownloads, guid: &str, name: &str, max: u64) -> Report {
    let failed = |why: String| Report::Failed {
        name: name.to_string(),
        why,
    };
    let Some(dir) = d.lock().dir.clone() else {
        return failed("failed: downloads were off for this session".into());
    };
    let src = dir.join(INCOMING_DIR).join(guid);
    let meta = match std::fs::symlink_metadata(&src) {
        Ok(m) if m.is_file() => m,
        _ => {
            remove_partial(d, guid);
            return failed("failed: the browser reported it finished but wrote no file".into());
        }
    };
    if meta.len() > max {
        remove_partial(d, guid);
        return failed(too_big_message(meta.len(), max));
    }
    // A hard link never replaces an existing entry (EEXIST) nor follows a symlink at the
    // destination: the first free name wins.
    let (stem, ext) = split_ext(name);
    for i in 1..=1000 {
        let candidate = if i == 1 {
            name.to_string()
        } else {
            format!("{stem}-{i}{ext}")
        };
        let dst = dir.join(&candidate);
        match std::fs::hard_link(&src, &dst) {
            Ok(()) => {
                let _ = std::fs::remove_file(&src);
                return Report::Done {
                    mime: forge_tools::builtins::file_create::mime_for(&candidate),
                    filename: candidate,
                    path: dst,
                    size: meta.len(),
                };
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                remove_partial(d, guid);
                return failed(format!("failed: could not keep it in the workspace: {e}"));
            }
        }
    }
    remove_partial(d, guid);
    failed("failed: too many downloads with that name".into())
}

fn split_ext(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 && name.len() - i <= 11 => (&name[..i], &name[i..]),
        _ => (name, ""),
    }
}

/// A file name safe to create in the workspace from a name a page or a user suggested: the last
/// path component, no control or invisible formatting characters, no characters that are
/// separators or special on common file systems, no leading dots or spaces, at most
/// [`MAX_NAME_CHARS`] characters (the extension kept); `fallback` when nothing is left.
pub(crate) fn safe_name(suggested: &str, fallback: &str) -> String {
    let last = suggested.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last
        .chars()
        .filter(|c| {
            !c.is_control()
                && !matches!(
                    c,
                    ':' | '*' | '?' | '"' | '<' | '>' | '|' | '\u{200B}'..='\u{200F}'
                        | '\u{202A}'..='\u{202E}'
                        | '\u{2066}'..='\u{2069}'
                        | '\u{FEFF}'
                )
        })
        .collect();
    let clean = clean
        .trim()
        .trim_start_matches(['.', ' '])
        .trim_end_matches(['.', ' '])
        .to_string();
    if clean.is_empty() {
        return fallback.to_string();
    }
    if clean.chars().count() <= MAX_NAME_CHARS {
        return clean;
    }
    let (stem, ext) = split_ext(&clean);
    let keep = MAX_NAME_CHARS.saturating_sub(ext.chars().count());
    let stem: String = stem.chars().take(keep).collect();
    format!("{}{ext}", stem.trim_end_matches(['.', ' ']))
}

/// Whether the file at `path` starts as a PDF does (`%PDF-`), whatever its name says.
pub(crate) fn is_pdf(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 5];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"%PDF-"
}

/// How much of a PDF's text a call shows, in bytes (`browser_extract` takes `max_chars`).
pub(crate) const PDF_BUDGET: usize = 6000;

/// The text of the PDF at `path` from `from_page` within `budget` bytes, fenced (it is outside
/// content), then forge's own line saying how to read on; or why it could not be read.
pub(crate) async fn pdf_text(
    path: &Path,
    from_page: usize,
    budget: usize,
    secrets: &forge_tools::Secrets,
) -> Result<String, String> {
    let limits = forge_tools::pdf::PdfLimits::default();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > limits.max_input_bytes as u64 {
        return Err(format!(
            "not shown: larger than the PDF reader's {} limit",
            human(limits.max_input_bytes as u64)
        ));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("not shown: {e}"))?;
    let doc = forge_tools::pdf::read_pdf(bytes, &limits)
        .await
        .map_err(|e| e.to_string())?;
    let n = doc.page_count.max(doc.pages.len());
    if from_page > n.max(1) {
        return Err(format!("page {from_page} is past the end ({n} pages)"));
    }
    let (text, next) = forge_tools::pdf::render_pdf_text_next(&doc, from_page, budget);
    // The reader's own "read on" note is replaced by forge's, outside the fence.
    let body = match (next, text.rfind("\n(pages ")) {
        (Some(_), Some(i)) => &text[..i],
        _ => text.as_str(),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out =
        forge_tools::fence::wrap(&format!("source=pdf file={name}"), &secrets.redact(body));
    if let Some(k) = next {
        out.push_str(&format!(
            "\npages {k}..{n} not shown: read on with browser_extract {{\"page\": {k}}}"
        ));
    }
    Ok(out)
}

/// `48 KB`, `1.2 MB`, `312 B`.
pub(crate) fn human(n: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * 1024;
    if n < KB {
        format!("{n} B")
    } else if n < MB {
        format!("{} KB", n.div_ceil(KB))
    } else {
        format!("{:.1} MB", n as f64 / MB as f64)
    }
}

/// The status lines and the `files` entries (`{filename, mime_type, path, size_bytes}`, as the
/// runtime captures artifacts) for `reports` and the downloads still `running`.
pub(crate) fn describe(reports: &[Report], running: &[String]) -> (Vec<String>, Vec<Value>) {
    let mut lines = Vec::new();
    let mut files = Vec::new();
    for r in reports {
        match r {
            Report::Done {
                filename,
                path,
                size,
                mime,
            } => {
                lines.push(format!(
                    "downloaded: {filename} ({}, {mime}) into {DOWNLOADS_DIR}/{filename}",
                    human(*size)
                ));
                files.push(json!({
                    "filename": filename,
                    "mime_type": mime,
                    "path": path.to_string_lossy(),
                    "size_bytes": size,
                }));
            }
            Report::Failed { name, why } => lines.push(format!("download of {name} {why}")),
        }
    }
    lines.extend(running.iter().cloned());
    (lines, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_made_safe() {
        assert_eq!(safe_name("../../x", "d"), "x");
        assert_eq!(safe_name("..\\..\\evil.exe", "d"), "evil.exe");
        assert_eq!(safe_name(".bashrc", "d"), "bashrc");
        assert_eq!(safe_name("...", "d"), "d");
        assert_eq!(safe_name("", "d"), "d");
        assert_eq!(safe_name("a\u{0}b\nc\u{202E}fdp.exe", "d"), "abcfdp.exe");
        let long = format!("{}.pdf", "a".repeat(300));
        let s = safe_name(&long, "d");
        assert_eq!(s.chars().count(), MAX_NAME_CHARS);
        assert!(s.ends_with(".pdf"));
        assert_eq!(safe_name("invoice 2026-11.pdf", "d"), "invoice 2026-11.pdf");
    }

    #[test]
    fn sizes_read_like_a_person_would_write_them() {
        assert_eq!(human(312), "312 B");
        assert_eq!(human(48 * 1024), "48 KB");
        assert_eq!(human(5 * 1024 * 1024), "5.0 MB");
    }
}
