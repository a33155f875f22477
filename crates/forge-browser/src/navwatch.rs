//! Navigation watching: subscribe before an action ([`NavWatch::new`]), then ask what it led to
//! ([`NavWatch::settle`]: navigated or not, the document's HTTP status, a failure), and map the
//! egress proxy's refusals to a clear blocked message (never echoing a page-sent reason).

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventRequestWillBeSent, EventResponseReceived, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    ClientNavigationDisposition, EventFrameRequestedNavigation, EventFrameStartedLoading,
    EventFrameStoppedLoading,
};
use chromiumoxide::Page;
use forge_egress::EgressRefusal;
use futures::StreamExt;

use crate::error::R;
use crate::manager::BrowserManager;
use crate::observe;

/// A navigation watcher: subscribe before acting, then ask what happened.
pub(crate) struct NavWatch {
    started: futures::stream::BoxStream<'static, String>,
    stopped: futures::stream::BoxStream<'static, String>,
    responses: chromiumoxide::listeners::EventStream<EventResponseReceived>,
    failures: chromiumoxide::listeners::EventStream<EventLoadingFailed>,
    requests: chromiumoxide::listeners::EventStream<EventRequestWillBeSent>,
    frame: String,
    /// The session's downloads and how many had begun when the watch started
    /// ([`NavWatch::downloads`]): a download beginning ends the wait like a navigation would.
    dl: Option<(std::sync::Arc<crate::downloads::SessionDownloads>, usize)>,
}

#[derive(Default, Debug)]
pub(crate) struct NavOutcome {
    pub(crate) navigated: bool,
    pub(crate) finished: bool,
    pub(crate) status: Option<i64>,
    pub(crate) blocked: Option<EgressRefusal>,
    pub(crate) failed: Option<String>,
    /// A download of the session began while the watch waited.
    pub(crate) download: bool,
    /// The frame's document response said `Content-Disposition: attachment`: the navigation
    /// turns into a download, the page stays as it was.
    pub(crate) attachment: bool,
}

impl NavOutcome {
    /// Whether the navigation seen was one that turned into a download (its document load
    /// aborted, or its response an attachment), so no page was loaded.
    pub(crate) fn became_download(&self) -> bool {
        self.download
            && (self.attachment
                || self
                    .failed
                    .as_deref()
                    .is_some_and(|f| f.contains("ERR_ABORTED")))
    }
}

impl NavWatch {
    pub(crate) async fn new(page: &Page) -> R<Self> {
        let frame = observe::main_frame(page).await?.as_ref().to_string();
        // "r:<frame>" when a same-tab navigation is requested (fires while the click is being
        // handled), "s:<frame>" when loading starts.
        let requested = page
            .event_listener::<EventFrameRequestedNavigation>()
            .await?
            .filter(|e| {
                futures::future::ready(matches!(
                    e.disposition,
                    ClientNavigationDisposition::CurrentTab
                ))
            })
            .map(|e| format!("r:{}", e.frame_id.as_ref()));
        let loading = page
            .event_listener::<EventFrameStartedLoading>()
            .await?
            .map(|e| format!("s:{}", e.frame_id.as_ref()));
        let started = futures::stream::select(requested, loading).boxed();
        let stopped = page
            .event_listener::<EventFrameStoppedLoading>()
            .await?
            .map(|e| e.frame_id.as_ref().to_string())
            .boxed();
        Ok(Self {
            started,
            stopped,
            responses: page.event_listener::<EventResponseReceived>().await?,
            failures: page.event_listener::<EventLoadingFailed>().await?,
            requests: page.event_listener::<EventRequestWillBeSent>().await?,
            frame,
            dl: None,
        })
    }

    /// Also watch `session`'s downloads: one that begins (a download link, a navigation that
    /// turned into a download, a page script's Blob) ends [`NavWatch::settle`]'s wait at once.
    pub(crate) fn downloads(mut self, session: &crate::session::Session) -> Self {
        let d = session.downloads.clone();
        let before = d.begun();
        self.dl = Some((d, before));
        self
    }

    /// Resolves when a download of the watched session began after the watch started (never
    /// without [`NavWatch::downloads`]).
    async fn download_began(
        dl: &Option<(std::sync::Arc<crate::downloads::SessionDownloads>, usize)>,
    ) {
        match dl {
            Some((d, before)) => d.begun_after(*before).await,
            None => futures::future::pending().await,
        }
    }

    /// Wait up to `quick` for a main-frame navigation to start; if it does, wait up to `limit`
    /// for it to finish, collecting the document's status and any egress refusal.
    pub(crate) async fn settle(
        &mut self,
        mgr: &BrowserManager,
        quick: Duration,
        limit: Duration,
    ) -> NavOutcome {
        let mut out = NavOutcome::default();
        let mut deadline = tokio::time::Instant::now() + quick;
        let mut requested = false;
        loop {
            tokio::select! {
                // Events already received come first, also when `quick` is zero.
                biased;
                f = self.started.next() => match f {
                    Some(f) if f == format!("s:{}", self.frame) => { out.navigated = true; break; }
                    Some(f) if f == format!("r:{}", self.frame) && !requested => {
                        // Requested: give the load up to 3 s to start (it may be cancelled).
                        requested = true;
                        deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                    }
                    Some(_) => continue,
                    None => return out,
                },
                _ = Self::download_began(&self.dl) => { out.download = true; return out; }
                _ = tokio::time::sleep_until(deadline) => return out,
            }
        }
        let mut deadline = tokio::time::Instant::now() + limit;
        let mut urls: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        loop {
            tokio::select! {
                f = self.stopped.next() => match f {
                    Some(f) if f == self.frame => { out.finished = true; break; }
                    Some(_) => {}
                    None => break,
                },
                // A navigation that turned into a download: the frame stops loading soon after
                // (its load aborted); the page stays as it was.
                _ = Self::download_began(&self.dl), if !out.download => {
                    out.download = true;
                    deadline = deadline.min(tokio::time::Instant::now() + Duration::from_secs(2));
                }
                Some(r) = self.requests.next() => {
                    if r.r#type == Some(ResourceType::Document) && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str()) {
                        urls.insert(r.request_id.as_ref().to_string(), r.request.url.clone());
                    }
                }
                Some(r) = self.responses.next() => {
                    self.take_response(mgr, &r, &mut out);
                }
                Some(f) = self.failures.next() => {
                    if f.r#type == ResourceType::Document {
                        if let Some(url) = urls.get(f.request_id.as_ref()) {
                            let url = url.clone();
                            out.failed = Some(f.error_text.clone());
                            if let Some(b) = blocked_from_error(mgr, &url, &f.error_text) {
                                out.blocked = Some(b);
                            }
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        // The frame's document response (or failure) can still be on its way: each CDP event kind
        // comes through its own listener, so `stoppedLoading` may be read before the response that
        // preceded it. A refused navigation is told by its response (the proxy's 403 and reason
        // header), so wait for it, briefly and only when the load finished without one.
        if out.finished && out.status.is_none() && out.failed.is_none() {
            let grace = tokio::time::Instant::now() + DOCUMENT_EVENT_GRACE;
            loop {
                tokio::select! {
                    biased;
                    Some(r) = self.requests.next() => {
                        if r.r#type == Some(ResourceType::Document) && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str()) {
                            urls.insert(r.request_id.as_ref().to_string(), r.request.url.clone());
                        }
                    }
                    Some(r) = self.responses.next() => {
                        if self.take_response(mgr, &r, &mut out) {
                            break;
                        }
                    }
                    Some(f) = self.failures.next() => {
                        if f.r#type == ResourceType::Document {
                            if let Some(url) = urls.get(f.request_id.as_ref()) {
                                out.failed = Some(f.error_text.clone());
                                out.blocked = blocked_from_error(mgr, url, &f.error_text);
                                break;
                            }
                        }
                    }
                    _ = tokio::time::sleep_until(grace) => break,
                }
            }
        }
        // Events that arrived but were not read: the loop above ends on the frame's
        // stoppedLoading, and each event kind has its own listener, so the document load's
        // failure (ERR_ABORTED, how a navigation that turned into a download ends) can still be
        // unread; without it such a click read "navigated (HTTP 200)". Bounded by what arrived.
        for _ in 0..1000 {
            let Some(Some(r)) = self.requests.now_or_never_opt() else {
                break;
            };
            if r.r#type == Some(ResourceType::Document)
                && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str())
            {
                urls.insert(r.request_id.as_ref().to_string(), r.request.url.clone());
            }
        }
        for _ in 0..1000 {
            if out.failed.is_some() {
                break;
            }
            let Some(Some(f)) = self.failures.now_or_never_opt() else {
                break;
            };
            if f.r#type == ResourceType::Document {
                if let Some(url) = urls.get(f.request_id.as_ref()) {
                    out.failed = Some(f.error_text.clone());
                    // A refusal already told by the document response is kept.
                    if let Some(b) = blocked_from_error(mgr, url, &f.error_text) {
                        out.blocked = Some(b);
                    }
                }
            }
        }
        // Drain what already arrived (responses can come before stoppedLoading is read).
        while let Some(Some(r)) = self.responses.now_or_never_opt() {
            self.take_response(mgr, &r, &mut out);
        }
        // A load aborted (not refused), or an attachment, is how a navigation that turned into a
        // download ends; its download may be counted a moment later: wait for it, bounded, only
        // then.
        if !out.download
            && self.dl.is_some()
            && (out.attachment
                || out
                    .failed
                    .as_deref()
                    .is_some_and(|f| f.contains("ERR_ABORTED")))
        {
            out.download =
                tokio::time::timeout(Duration::from_secs(3), Self::download_began(&self.dl))
                    .await
                    .is_ok();
        }
        out
    }
}

impl NavWatch {
    /// Note the frame's document response (its status, and the proxy's refusal behind it, if any);
    /// whether `r` was that response.
    fn take_response(
        &self,
        mgr: &BrowserManager,
        r: &EventResponseReceived,
        out: &mut NavOutcome,
    ) -> bool {
        if r.r#type != ResourceType::Document
            || r.frame_id.as_ref().map(|f| f.as_ref()) != Some(self.frame.as_str())
        {
            return false;
        }
        out.status = Some(r.response.status);
        out.attachment = header(&r.response.headers, "content-disposition").is_some_and(|v| {
            v.trim_start()
                .get(..10)
                .is_some_and(|h| h.eq_ignore_ascii_case("attachment"))
        });
        if let Some(code) = egress_reason(&r.response.headers) {
            out.blocked = blocked_from_code(mgr, &r.response.url, r.response.status, &code);
        }
        true
    }
}

/// How long [`NavWatch::settle`] waits, after the frame stopped loading, for the document response
/// whose event has not been read yet.
const DOCUMENT_EVENT_GRACE: Duration = Duration::from_secs(1);

trait NowOrNever {
    type Out;
    fn now_or_never_opt(&mut self) -> Option<Option<Self::Out>>;
}
impl<S: futures::Stream + Unpin> NowOrNever for S {
    type Out = S::Item;
    fn now_or_never_opt(&mut self) -> Option<Option<S::Item>> {
        futures::FutureExt::now_or_never(self.next())
    }
}

/// The value of the response header `name` (any case), if present.
fn header<'a>(
    headers: &'a chromiumoxide::cdp::browser_protocol::network::Headers,
    name: &str,
) -> Option<&'a str> {
    headers
        .inner()
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// The proxy's refusal reason from a response's headers, if it is one.
fn egress_reason(
    headers: &chromiumoxide::cdp::browser_protocol::network::Headers,
) -> Option<String> {
    let obj = headers.inner().as_object()?;
    obj.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-forge-egress-reason"))
        .and_then(|(_, v)| v.as_str())
        .map(|s| s.trim().to_string())
}

/// The refusal behind a plain-HTTP 403 carrying the proxy's reason header, or None when the header
/// cannot be the proxy's. Any server can send that header itself (and over HTTPS only the server
/// can), so its text is never echoed: with a refusal log, only a refusal the proxy recorded
/// counts; without one, only the proxy's own codes ([`EgressRefusal::from_proxy_response`]).
fn blocked_from_code(
    mgr: &BrowserManager,
    url: &str,
    status: i64,
    code: &str,
) -> Option<EgressRefusal> {
    let parsed = url::Url::parse(url).ok()?;
    if status != 403 || parsed.scheme() != "http" {
        return None;
    }
    let bare = parsed.host_str()?.to_string();
    if let Some(log) = mgr.refusals() {
        return log.recent(&bare, Duration::from_secs(30));
    }
    EgressRefusal::from_proxy_response(url, code)
}

/// The refusal behind a failed document load, when the failure is the proxy's refusal.
pub(crate) fn blocked_from_error(
    mgr: &BrowserManager,
    url: &str,
    error_text: &str,
) -> Option<EgressRefusal> {
    // An aborted load is not a refusal: a navigation that turned into a download ends so (the
    // proxy refuses with a 403 response or a failed tunnel, never an abort).
    if error_text.contains("ERR_ABORTED") {
        return None;
    }
    let bare = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| url.to_string());
    if let Some(log) = mgr.refusals() {
        if let Some(r) = log.recent(&bare, Duration::from_secs(30)) {
            return Some(r);
        }
    }
    if error_text.contains("ERR_TUNNEL_CONNECTION_FAILED") {
        if mgr.refusals().is_some() {
            return None; // the proxy did not record a refusal: some other tunnel failure.
        }
        return Some(EgressRefusal::from_tunnel_failure(url));
    }
    None
}
