//! The page library (`observe.js`) run in forge's isolated world, and the compact observation
//! text the model sees.
//!
//! - `world.rs`: the isolated-world cache and the calls into the library ([`call`], [`forget`],
//!   [`main_frame`], [`wait_ready`], [`let_page_run`]).
//! - `listeners.rs`: click-listener marking (elements with JS click listeners count as
//!   interactive).
//! - `render.rs`: the observation text ([`render`], [`element_line`]).
//! - here: [`PageError`], the observation's shape ([`Observation`], [`Element`], ...) and
//!   [`observe`] (install, mark listeners, observe).
//!
//! Observation format (all of it page-derived, so the tools put it inside the fence):
//!
//! ```text
//! page: <title>
//! url: <url>
//! viewport: 1280x800, scrolled 0 of 2400px
//! elements (in view, reading order):
//! e1 link "Home" -> /
//! e2 textbox "Email" type=email value=" a@b.example\n" required
//! e3 button "Buy" [covered by div#cookie "We use cookies"]
//! e4 button hint="star"
//! e9 row "From Jane: Lunch?"
//!   e10 button hint="star"
//!   e11 button hint="trash"
//! e12 clickable "Documents" has children, collapsed
//! e13 scrollable hint="results" scroll 0/1,450px, 12 more items below in this list
//! e14 option "Apricot" [scrolled out of its list]
//! f1: iframe "Payment" same-origin http://127.0.0.1:8080
//! f2: iframe "Local" blocked "file:///etc/passwd" (file: pages do not load in frames)
//! f1e4 button "Pay"
//! 12 more below, 3 above (browser_state with scroll=1 or a larger max_chars to see them)
//! text:
//! e20 h1 "Sign up"
//! e21 p "Create an account to …"
//! loose text outside blocks
//! ```
//!
//! - `hint=` (never a name) for a control without an accessible name: an inner svg `<title>` or
//!   `<use href="#icon-…">`, an icon-font class (`fa-star`) or ligature (`material-icons`),
//!   words of its class list and id, a `data-action`-like attribute, a background image's file.
//! - `row "…"`: the text of a repeated item (list row, post, card, table row) whose controls are
//!   listed under it, indented. When the item is itself a control its own line is the header,
//!   marked `(row)` and named by the item's own text (its controls' names left out), e.g.
//!   `e9 clickable "Alice Lunch on Friday?" (row)`; any control holding two or more controls
//!   is named that way when it has no label.
//! - ARIA state: `value="30" range="0-100"` from `aria-valuenow`/`aria-valuetext` (slider
//!   handles), `sorted ascending|descending|other` from `aria-sort` (column headers).
//! - Names follow slots (a shadow `<label>`'s slotted text names its input); an element hit at
//!   its centre by another part of the same component (its shadow host's tree) is not covered.
//! - Rows a grid positions absolutely (`[role=row]`, AG Grid after a sort) are listed in screen
//!   order; a column resize handle repeated in each body row is left out (the header's is listed).
//! - `handle hint="resize handle"`: a grab-only control (jQuery UI's `.ui-resizable-handle`, a
//!   Split.js gutter, anything where a resize cursor starts), for `browser_drag {from, by}`.
//! - Text runs: besides the text blocks below, a `div`/`span` with text of its own (or a block of
//!   only inline children) outside any text block and listed control gets a ref too; its line
//!   ends where it ends, so it is never joined with the next control's name.
//! - Values are exact: JSON-escaped (`\n`, `\t`, `\"`), spaces kept; over 60 chars the first 60
//!   plus `…` and `(N chars)`.
//! - `expanded`/`collapsed` from `aria-expanded` or `<details>`; `has children, collapsed` when
//!   inferred from an item's nested list.
//! - `draggable "…"` for a `draggable="true"` element; `treeitem`/`clickable` for the items of a
//!   list whose click listener sits on the list (delegation), the item's label element when the
//!   `<li>` has no text of its own.
//! - Scroll containers (vertical): `scroll <top>/<max>px`, the items below (and above) the
//!   visible part; controls they clip are `[scrolled out of its list]` (at most three per list),
//!   `[clipped by its container]` for overflow-hidden ancestors. Horizontal-only ones
//!   (carousels): `scroll x <left>/<max>px, N more items to the right, M to the left`.
//! - Text blocks (p, li, td, th, headings, ...) carry a ref, usable by `scroll_to`, hover and
//!   click like any other; a nested block ends the outer one's line, and a block that is only a
//!   link or button gets none (the control has a ref).

use chromiumoxide::{Command, Page};
use serde::Deserialize;
use serde_json::Value;

mod listeners;
mod render;
mod world;

pub(crate) use listeners::{mark_click_listeners, mark_frame_click_listeners};
pub(crate) use render::DEFAULT_BUDGET;
pub use render::{element_line, render};
pub use world::{call, forget, let_page_run, main_frame, wait_ready};
pub(crate) use world::{element_object, evaluate_isolated, isolated_context};

/// The page library, evaluated in the isolated world.
pub(crate) const LIBRARY: &str = include_str!("observe.js");

/// The isolated world's name (one per frame document; Chromium reuses it for the same name).
pub(crate) const WORLD: &str = "forge";

/// Where the CDP commands for one document go: a tab's own session ([`Page`]) or, for a
/// cross-origin frame, the channel `frames.rs` reaches it through. Lets the listener marking
/// (`listeners.rs`) serve both with one copy.
pub(crate) trait Cdp: Sync {
    /// Send `cmd` and wait for its answer.
    fn exec<C: Command + Send + Sync>(
        &self,
        cmd: C,
    ) -> impl std::future::Future<Output = Result<C::Response, PageError>> + Send;
}

impl Cdp for Page {
    async fn exec<C: Command + Send + Sync>(&self, cmd: C) -> Result<C::Response, PageError> {
        self.execute(cmd)
            .await
            .map(|r| r.result)
            .map_err(|e| PageError::Cdp(e.to_string()))
    }
}

/// Why a call into the page library failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageError {
    /// The CDP command failed (page gone, target closed, browser gone).
    #[error("{0}")]
    Cdp(String),
    /// The script threw (should not happen; reported with the exception text).
    #[error("page script error: {0}")]
    Script(String),
}

/// What `observe` returns.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Observation {
    pub url: String,
    pub title: String,
    pub viewport: Viewport,
    pub scroll: Scroll,
    pub elements: Vec<Element>,
    pub frames: Vec<Frame>,
    /// Headers of the repeated items (rows, posts, cards) that controls are grouped under.
    #[serde(default)]
    pub rows: Vec<Row>,
    pub text: String,
    /// The engine has no layout (Lightpanda): where elements are and what covers them is not
    /// known, so the rendering says so instead of inventing it ([`forget_layout`]).
    #[serde(skip)]
    pub layout_unknown: bool,
}

/// The element states measured from boxes: a scroll container's position and the items it
/// holds beyond its visible part.
const LAYOUT_STATES: [&str; 6] = [
    "scroll",
    "scrollX",
    "itemsBelow",
    "itemsAbove",
    "itemsRight",
    "itemsLeft",
];

/// Drop what an engine without layout cannot know: every element's place (its synthetic
/// boxes would call far-down elements out of view), cover, clipping by a container (Lightpanda's
/// synthetic boxes called most links of a corpus page "clipped by its container") and scroll
/// positions; mark the observation so.
pub fn forget_layout(obs: &mut Observation) {
    obs.layout_unknown = true;
    for e in &mut obs.elements {
        e.location = "in".into();
        e.covered_by = None;
        e.clipped = None;
        for k in LAYOUT_STATES {
            e.state.remove(k);
        }
    }
}

/// A repeated item (mail row, post, card, table row) whose controls are listed under it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Row {
    #[serde(rename = "ref")]
    pub reference: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Viewport {
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Scroll {
    pub y: f64,
    pub height: f64,
}

/// One interactive element.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Element {
    #[serde(rename = "ref")]
    pub reference: String,
    pub role: String,
    pub name: String,
    pub state: serde_json::Map<String, Value>,
    /// `in`, `above`, `below` or `side` (relative to the viewport).
    #[serde(rename = "where")]
    pub location: String,
    #[serde(rename = "coveredBy", default)]
    pub covered_by: Option<String>,
    /// For a control without a name: words from its icon, classes, data attributes or
    /// background image (`star`, `trash`).
    #[serde(default)]
    pub hint: Option<String>,
    /// The ref of the repeated item (row) it belongs to.
    #[serde(default)]
    pub row: Option<String>,
    /// `list` when its scroll container has it scrolled out of view, `clip` when an
    /// overflow-hidden ancestor cuts it off.
    #[serde(default)]
    pub clipped: Option<String>,
}

/// A frame (iframe) on the page.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Frame {
    pub frame: String,
    pub name: String,
    pub origin: String,
    #[serde(rename = "sameOrigin")]
    pub same_origin: bool,
    pub src: String,
    /// Where the frame sits in `elements` (its content goes there when forge walks it).
    #[serde(default)]
    pub at: Option<usize>,
    /// Why the frame shows nothing: a scheme Chromium never loads into a web page's frame
    /// (`file:`, `view-source:`, `chrome:`), or a load that ended on Chromium's error page (a
    /// redirect to such a scheme, say).
    #[serde(default)]
    pub blocked: Option<String>,
    /// Same origin as its page by URL and not sandboxed, yet the engine gives no document to
    /// read (Lightpanda 1.0.2): rendered as same-origin with its content unreachable, never as
    /// cross-origin.
    #[serde(default)]
    pub unreachable: bool,
    /// A cross-origin frame whose content forge walked through the frame's own context
    /// (`frames.rs`); set on the Rust side, never by the page library.
    #[serde(skip)]
    pub walked: bool,
}

/// Observe the active page of `page`.
pub async fn observe(page: &Page) -> Result<Observation, PageError> {
    // Install the library (if this document's world does not have it yet), then mark listener
    // elements, then observe.
    let ctx = isolated_context(page).await?;
    mark_click_listeners(page, ctx).await;
    let v = call(page, "observe", &serde_json::json!({"maxText": 20000})).await?;
    serde_json::from_value(v)
        .map_err(|e| PageError::Script(format!("unexpected observation shape: {e}")))
}
