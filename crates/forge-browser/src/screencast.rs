//! The live view of one tab ([`LiveTab`]): a CDP screencast (`Page.startScreencast`, JPEG, at
//! most [`MAX_FRAME_WIDTH`] px wide, at most [`MAX_FPS`] frames a second) that runs only while at
//! least one watcher holds a receiver from [`LiveTab::subscribe`], and input dispatch to the same
//! tab ([`LiveTab::input`]: mouse click/move/wheel, key presses, typed text through CDP `Input.*`),
//! with coordinates mapped from the frame's size to the viewport.
//!
//! Invariants, each kept here:
//! - No watcher, no screencast: the driver task starts the screencast when the first receiver
//!   subscribes and stops it when the last one is dropped (`watch::Sender::closed`); the decision
//!   to stop and the decision to start are taken under one lock, so a watcher arriving while the
//!   driver stops restarts it instead of waiting on a dead stream.
//! - Rate cap: a frame is acknowledged (`Page.screencastFrameAck`) no sooner than
//!   [`MIN_FRAME_GAP`] after the previous one; Chromium sends the next frame only after the ack.
//! - The input goes to this one tab's page: the same confined browser context, so anything a
//!   person's input makes the page fetch leaves through the tab's egress proxy and policy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventScreencastFrame, ScreencastFrameAckParams, StartScreencastFormat, StartScreencastParams,
    StopScreencastParams,
};
use chromiumoxide::Page;
use futures::StreamExt;
use tokio::sync::watch;

use crate::keys::{press_key, KeyPress};
use crate::pointer::mouse;

/// Widest frame sent (px); Chromium scales the frame down to fit.
pub const MAX_FRAME_WIDTH: i64 = 1280;
/// Tallest frame sent (px).
pub const MAX_FRAME_HEIGHT: i64 = 1280;
/// JPEG quality of the frames (0-100).
pub const JPEG_QUALITY: i64 = 60;
/// Most frames a second.
pub const MAX_FPS: u64 = 5;
/// The least time between two frames.
pub const MIN_FRAME_GAP: Duration = Duration::from_millis(1000 / MAX_FPS);
/// Time limit of one CDP command of the live view.
const LIVE_LIMIT: Duration = Duration::from_secs(10);
/// Live tabs a manager keeps at once (idle ones are dropped past it).
const MAX_LIVE_TABS: usize = 64;
/// Longest text one `Text` input may carry.
pub const MAX_INPUT_TEXT: usize = 2000;

/// One screencast frame.
#[derive(Debug)]
pub struct Frame {
    /// The JPEG bytes.
    pub jpeg: Vec<u8>,
    /// The frame's size in pixels (from the JPEG header; 0 x 0 if it has none).
    pub size: (u32, u32),
    /// The viewport (CSS px) the frame shows.
    pub viewport: (f64, f64),
    /// 1 for the first frame of this tab's live view, then counting up.
    pub seq: u64,
}

/// One input event from a person, in frame coordinates: `x`, `y` are pixels of a frame that is
/// `frame_w` x `frame_h` px as the person's page shows it; they are mapped to the viewport.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LiveInput {
    /// A left click at a point.
    Click {
        x: f64,
        y: f64,
        frame_w: f64,
        frame_h: f64,
    },
    /// The pointer moved to a point.
    Move {
        x: f64,
        y: f64,
        frame_w: f64,
        frame_h: f64,
    },
    /// A wheel turn at a point (`dx`, `dy` in CSS px).
    Wheel {
        x: f64,
        y: f64,
        frame_w: f64,
        frame_h: f64,
        dx: f64,
        dy: f64,
    },
    /// One key press by name (`Enter`, `Tab`, `Backspace`, `a`, `Control+A`).
    Key(String),
    /// Text typed as it is (at most [`MAX_INPUT_TEXT`] characters).
    Text(String),
}

/// Why an input event was not delivered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// The event made no sense (a point outside the frame, an unknown key, too much text).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Chromium did not take it (the tab is gone, no answer).
    #[error("the tab did not take the input: {0}")]
    Tab(String),
}

/// The live side of one tab: its screencast and input. Get one from
/// [`BrowserManager::live_tab`](crate::BrowserManager::live_tab).
pub struct LiveTab {
    page: Page,
    tx: watch::Sender<Option<Arc<Frame>>>,
    /// Whether a driver task runs the screencast (decided under this lock only).
    active: StdMutex<bool>,
    /// Screencast starts, shared by the manager's live tabs.
    starts: Arc<AtomicU64>,
    frames: AtomicU64,
    /// The viewport of the last frame (CSS px); the browser's configured size before one.
    viewport: StdMutex<(f64, f64)>,
}

impl LiveTab {
    pub(crate) fn new(page: Page, viewport: (u32, u32), starts: Arc<AtomicU64>) -> Arc<Self> {
        let (tx, _) = watch::channel(None);
        Arc::new(Self {
            page,
            tx,
            active: StdMutex::new(false),
            starts,
            frames: AtomicU64::new(0),
            viewport: StdMutex::new((f64::from(viewport.0), f64::from(viewport.1))),
        })
    }

    /// Watch this tab: the receiver sees each new frame (the latest one only, never a queue).
    /// The screencast runs while at least one receiver is alive.
    pub fn subscribe(self: &Arc<Self>) -> watch::Receiver<Option<Arc<Frame>>> {
        let rx = self.tx.subscribe();
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if !*active {
            *active = true;
            tokio::spawn(drive(self.clone()));
        }
        rx
    }

    /// Frames received from Chromium for this tab so far.
    pub fn frames_received(&self) -> u64 {
        self.frames.load(Ordering::SeqCst)
    }

    /// Whether the screencast runs now.
    pub fn is_casting(&self) -> bool {
        *self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Map frame point (`x`, `y`) of a `fw` x `fh` frame to viewport CSS px.
    fn to_viewport(&self, x: f64, y: f64, fw: f64, fh: f64) -> Result<(f64, f64), LiveError> {
        let finite = [x, y, fw, fh].iter().all(|v| v.is_finite());
        if !finite || fw < 1.0 || fh < 1.0 || x < 0.0 || y < 0.0 || x > fw || y > fh {
            return Err(LiveError::Invalid(format!(
                "the point ({x}, {y}) is not inside a {fw} x {fh} frame"
            )));
        }
        let (vw, vh) = *self.viewport.lock().unwrap_or_else(|p| p.into_inner());
        Ok((x / fw * vw, y / fh * vh))
    }

    /// Deliver one input event to the tab.
    pub async fn input(&self, ev: LiveInput) -> Result<(), LiveError> {
        let tab = |e: crate::error::ActionError| {
            LiveError::Tab(forge_tools::ToolError::from(e).to_string())
        };
        let run = async {
            match ev {
                LiveInput::Click {
                    x,
                    y,
                    frame_w,
                    frame_h,
                } => {
                    let (vx, vy) = self.to_viewport(x, y, frame_w, frame_h)?;
                    let p = &self.page;
                    mouse(p, DispatchMouseEventType::MouseMoved, vx, vy, None, 0)
                        .await
                        .map_err(tab)?;
                    mouse(
                        p,
                        DispatchMouseEventType::MousePressed,
                        vx,
                        vy,
                        Some(MouseButton::Left),
                        1,
                    )
                    .await
                    .map_err(tab)?;
                    mouse(
                        p,
                        DispatchMouseEventType::MouseReleased,
                        vx,
                        vy,
                        Some(MouseButton::Left),
                        1,
                    )
                    .await
                    .map_err(tab)
                }
                LiveInput::Move {
                    x,
                    y,
                    frame_w,
                    frame_h,
                } => {
                    let (vx, vy) = self.to_viewport(x, y, frame_w, frame_h)?;
                    mouse(
                        &self.page,
                        DispatchMouseEventType::MouseMoved,
                        vx,
                        vy,
                        None,
                        0,
                    )
                    .await
                    .map_err(tab)
                }
                LiveInput::Wheel {
                    x,
                    y,
                    frame_w,
                    frame_h,
                    dx,
                    dy,
                } => {
                    let (vx, vy) = self.to_viewport(x, y, frame_w, frame_h)?;
                    if !dx.is_finite() || !dy.is_finite() {
                        return Err(LiveError::Invalid(
                            "the wheel deltas must be numbers".into(),
                        ));
                    }
                    let cmd = DispatchMouseEventParams::builder()
                        .r#type(DispatchMouseEventType::MouseWheel)
                        .x(vx)
                        .y(vy)
                        .delta_x(dx.clamp(-5000.0, 5000.0))
                        .delta_y(dy.clamp(-5000.0, 5000.0))
                        .build()
                        .map_err(LiveError::Tab)?;
                    self.page
                        .execute(cmd)
                        .await
                        .map(|_| ())
                        .map_err(|e| LiveError::Tab(e.to_string()))
                }
                LiveInput::Key(name) => {
                    let k = KeyPress::parse(&name).map_err(|e| {
                        LiveError::Invalid(forge_tools::ToolError::from(e).to_string())
                    })?;
                    press_key(&self.page, &k).await.map_err(tab)
                }
                LiveInput::Text(text) => {
                    if text.chars().count() > MAX_INPUT_TEXT {
                        return Err(LiveError::Invalid(format!(
                            "at most {MAX_INPUT_TEXT} characters at once"
                        )));
                    }
                    self.page
                        .execute(InsertTextParams::new(text))
                        .await
                        .map(|_| ())
                        .map_err(|e| LiveError::Tab(e.to_string()))
                }
            }
        };
        match tokio::time::timeout(LIVE_LIMIT, run).await {
            Ok(r) => r,
            Err(_) => Err(LiveError::Tab(format!("no answer within {LIVE_LIMIT:?}"))),
        }
    }
}

/// Run the screencast while anyone watches.
async fn drive(lt: Arc<LiveTab>) {
    // Bounded: each round either ends the task (nobody watches, or the tab is gone) or serves a
    // watcher who arrived while the previous round stopped.
    loop {
        let gone = cast_while_watched(&lt).await;
        let mut active = lt.active.lock().unwrap_or_else(|p| p.into_inner());
        if !gone && lt.tx.receiver_count() > 0 {
            continue;
        }
        *active = false;
        lt.tx.send_replace(None);
        return;
    }
}

/// One screencast round: start, forward frames (capped), stop when the last watcher leaves.
/// Returns true when the tab is gone.
async fn cast_while_watched(lt: &LiveTab) -> bool {
    let Ok(mut events) = lt.page.event_listener::<EventScreencastFrame>().await else {
        return true;
    };
    let start = StartScreencastParams::builder()
        .format(StartScreencastFormat::Jpeg)
        .quality(JPEG_QUALITY)
        .max_width(MAX_FRAME_WIDTH)
        .max_height(MAX_FRAME_HEIGHT)
        .every_nth_frame(1)
        .build();
    match tokio::time::timeout(LIVE_LIMIT, lt.page.execute(start)).await {
        Ok(Ok(_)) => {}
        _ => return true,
    }
    lt.starts.fetch_add(1, Ordering::SeqCst);
    let mut last: Option<tokio::time::Instant> = None;
    let gone = loop {
        tokio::select! {
            ev = events.next() => {
                let Some(ev) = ev else { break true };
                lt.frames.fetch_add(1, Ordering::SeqCst);
                let Ok(jpeg) = base64::engine::general_purpose::STANDARD.decode::<&str>(ev.data.as_ref()) else {
                    continue;
                };
                let viewport = (ev.metadata.device_width, ev.metadata.device_height);
                if viewport.0 >= 1.0 && viewport.1 >= 1.0 {
                    *lt.viewport.lock().unwrap_or_else(|p| p.into_inner()) = viewport;
                }
                let seq = lt.tx.borrow().as_ref().map_or(0, |f| f.seq) + 1;
                let size = jpeg_size(&jpeg).unwrap_or((0, 0));
                lt.tx.send_replace(Some(Arc::new(Frame { jpeg, size, viewport, seq })));
                // The rate cap: Chromium sends the next frame only after this ack.
                if let Some(at) = last {
                    tokio::time::sleep_until(at + MIN_FRAME_GAP).await;
                }
                last = Some(tokio::time::Instant::now());
                let _ = tokio::time::timeout(
                    LIVE_LIMIT,
                    lt.page.execute(ScreencastFrameAckParams::new(ev.session_id)),
                )
                .await;
            }
            () = lt.tx.closed() => break false,
        }
    };
    if !gone {
        let _ = tokio::time::timeout(LIVE_LIMIT, lt.page.execute(StopScreencastParams::default()))
            .await;
    }
    gone
}

/// Width and height of a JPEG from its start-of-frame segment.
pub fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut i = 2;
    // Bounded by the data: each step moves past one segment.
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            let h = u16::from_be_bytes([b[i + 5], b[i + 6]]);
            let w = u16::from_be_bytes([b[i + 7], b[i + 8]]);
            return Some((u32::from(w), u32::from(h)));
        }
        if len < 2 {
            return None;
        }
        i += 2 + len;
    }
    None
}

/// The manager's live tabs, by target id.
#[derive(Default)]
pub(crate) struct LiveTabs {
    tabs: StdMutex<HashMap<String, Arc<LiveTab>>>,
    pub(crate) starts: Arc<AtomicU64>,
}

impl LiveTabs {
    /// The live tab of `page` (made on first use).
    pub(crate) fn get(&self, page: &Page, viewport: (u32, u32)) -> Arc<LiveTab> {
        let key = page.target_id().inner().clone();
        let mut tabs = self.tabs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tabs.get(&key) {
            return t.clone();
        }
        if tabs.len() >= MAX_LIVE_TABS {
            tabs.retain(|_, t| t.is_casting());
        }
        let t = LiveTab::new(page.clone(), viewport, self.starts.clone());
        tabs.insert(key, t.clone());
        t
    }
}
