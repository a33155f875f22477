//! The engine seam: which browser runs the `browser_*` tools. [`Engine`] is what the manager and
//! the tools ask of an engine (its binary, how it is launched, what it can do); Chromium
//! (`chromium.rs`) and Lightpanda (`lightpanda.rs`) implement it. Both speak CDP, so sessions and
//! tools drive either through the same chromiumoxide connection; what differs is the process and
//! the [`Capability`] list, which decides which tools are registered ([`absent_reason`]).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::binary::BrowserNotFound;

mod chromium;
pub(crate) mod kind;
mod lightpanda;

pub use chromium::Chromium;
pub use kind::EngineKind;
pub use lightpanda::{
    cdp_url_from_log, lightpanda_env, serve_args, Lightpanda, LIGHTPANDA_BIN_VAR, LIGHTPANDA_NAME,
};

/// `FORGE_BROWSER_ENGINE`'s value, when set: the engine, or an error naming the variable and
/// the fix (a typo must not silently fall back to Chromium).
pub fn engine_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<EngineKind>, String> {
    match get("FORGE_BROWSER_ENGINE").filter(|v| !v.trim().is_empty()) {
        None => Ok(None),
        Some(v) => EngineKind::parse(&v).map(Some).ok_or_else(|| {
            format!(
                "FORGE_BROWSER_ENGINE={v} is not a browser engine; set it to {} or unset it",
                EngineKind::NAMES.join(" or ")
            )
        }),
    }
}

/// What a tool may need of an engine beyond loading pages, reading the DOM and sending input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Pixel screenshots and PDFs (Lightpanda renders no pixels: its screenshots show text only).
    Screenshots,
    /// Pointer drags along a path (need real layout: element boxes and hit testing).
    Drag,
    /// Selecting text by pointer ranges (needs layout).
    TextSelection,
    /// Layout-dependent checks: "in view", what covers an element, hover and scroll positions.
    Layout,
    /// Several tabs in one session (`window.open`, tab switching).
    SeveralTabs,
    /// Dialogs that block the page until answered (alert, confirm, prompt).
    Dialogs,
    /// A live view of the tab (screencast) for a person to watch or take over.
    Screencast,
    /// Setting the files of an `<input type=file>` (CDP `DOM.setFileInputFiles`).
    FileUploads,
}

impl Capability {
    /// Every capability, in a fixed order.
    pub const ALL: [Capability; 8] = [
        Capability::Screenshots,
        Capability::Drag,
        Capability::TextSelection,
        Capability::Layout,
        Capability::SeveralTabs,
        Capability::Dialogs,
        Capability::Screencast,
        Capability::FileUploads,
    ];

    /// A short name for messages and docs.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Screenshots => "screenshots",
            Capability::Drag => "drag",
            Capability::TextSelection => "text selection",
            Capability::Layout => "layout",
            Capability::SeveralTabs => "several tabs",
            Capability::Dialogs => "dialogs",
            Capability::Screencast => "screencast",
            Capability::FileUploads => "file uploads",
        }
    }
}

/// A browser engine: its binary, its process, and what it can do.
pub trait Engine: Send + Sync + 'static {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// Whether it can do `c`.
    fn can(&self, c: Capability) -> bool;

    /// The binary: `explicit` (an env variable's or the config's value) when given, else a PATH
    /// lookup in `path_var`. The error names what was searched and the fix.
    fn find_binary_in(
        &self,
        explicit: Option<PathBuf>,
        path_var: Option<OsString>,
    ) -> Result<PathBuf, BrowserNotFound>;

    /// The binary from the environment (the engine's own variable, then PATH).
    fn find_binary(&self) -> Result<PathBuf, BrowserNotFound>;

    /// Whether an unanswered CDP ping means the engine hangs. Lightpanda answers CDP on the thread
    /// that runs the page's scripts, so a busy page delays every answer for seconds; only its
    /// process exit and a lost connection say it died.
    fn ping_means_dead(&self) -> bool;
}

/// What each `browser_*` tool needs beyond the basics; a tool is registered only when its engine
/// can do all of it (tools not listed need nothing more).
pub const TOOL_NEEDS: &[(&str, &[Capability])] = &[
    ("browser_screenshot", &[Capability::Screenshots]),
    ("browser_pdf", &[Capability::Screenshots]),
    ("browser_drag", &[Capability::Drag, Capability::Layout]),
    (
        "browser_select_text",
        &[Capability::TextSelection, Capability::Layout],
    ),
    ("browser_hover", &[Capability::Layout]),
    ("browser_scroll", &[Capability::Layout]),
    ("browser_tabs", &[Capability::SeveralTabs]),
    ("browser_upload", &[Capability::FileUploads]),
    ("browser_handoff", &[Capability::Screencast]),
];

/// What `kind` lacks to serve `tool` (`no screenshots`, `no drag or layout`), or `None` when it
/// can serve it.
pub fn lacks(kind: EngineKind, tool: &str) -> Option<String> {
    let engine = kind.engine();
    let needs = TOOL_NEEDS.iter().find(|(n, _)| *n == tool)?.1;
    let missing: Vec<&str> = needs
        .iter()
        .filter(|c| !engine.can(**c))
        .map(|c| c.name())
        .collect();
    (!missing.is_empty()).then(|| format!("no {}", missing.join(" or ")))
}

/// Why `tool` is not registered on `kind` (chosen by forge.yaml `browser.engine` or
/// `FORGE_BROWSER_ENGINE`), or `None` when the engine can serve it.
pub fn absent_reason(kind: EngineKind, tool: &str) -> Option<String> {
    let lacks = lacks(kind, tool)?;
    Some(format!(
        "browser.engine is {kind}, which has {lacks}; use engine: chromium for this tool (docs/browser.md, \"Engines\")"
    ))
}

/// Why `tool` is not registered when every browser skill (`skills`) chose `kind` in its own
/// `requires.browser_engine`: the fix is in a skill, not in forge.yaml.
pub fn absent_reason_by_skills(kind: EngineKind, tool: &str, skills: &[&str]) -> Option<String> {
    let lacks = lacks(kind, tool)?;
    Some(format!(
        "the browser skills ({}) chose {kind} in requires.browser_engine, which has {lacks}; give the skill that needs this tool browser_engine: chromium (docs/browser.md, \"Engines\")",
        skills.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chromium_serves_every_tool_and_lightpanda_says_why_not() {
        for (tool, _) in TOOL_NEEDS {
            assert_eq!(absent_reason(EngineKind::Chromium, tool), None, "{tool}");
        }
        for c in Capability::ALL {
            assert!(EngineKind::Chromium.engine().can(c), "{c:?}");
        }
        let why = absent_reason(EngineKind::Lightpanda, "browser_screenshot").unwrap_or_default();
        assert!(
            why.contains("lightpanda, which has no screenshots"),
            "{why}"
        );
        let why = absent_reason(EngineKind::Lightpanda, "browser_drag").unwrap_or_default();
        assert!(why.contains("no drag or layout"), "{why}");
        assert!(absent_reason(EngineKind::Lightpanda, "browser_select_text").is_some());
        let why =
            absent_reason_by_skills(EngineKind::Lightpanda, "browser_screenshot", &["reader"])
                .unwrap_or_default();
        assert!(
            why.contains("(reader) chose lightpanda") && why.contains("no screenshots"),
            "{why}"
        );
        assert_eq!(
            absent_reason_by_skills(EngineKind::Chromium, "browser_screenshot", &["reader"]),
            None
        );
        for basic in [
            "browser_navigate",
            "browser_state",
            "browser_extract",
            "browser_click",
            "browser_fill",
            "browser_select",
            "browser_press",
            "browser_back",
        ] {
            assert_eq!(
                absent_reason(EngineKind::Lightpanda, basic),
                None,
                "{basic}"
            );
        }
    }

    #[test]
    fn the_env_variable_is_checked() {
        let none = engine_from_env(|_| None);
        assert_eq!(none, Ok(None));
        let lp = engine_from_env(|_| Some(" Lightpanda ".into()));
        assert_eq!(lp, Ok(Some(EngineKind::Lightpanda)));
        let bad = engine_from_env(|_| Some("firefox".into())).unwrap_err();
        assert!(bad.contains("FORGE_BROWSER_ENGINE=firefox"), "{bad}");
        assert!(bad.contains("chromium or lightpanda"), "{bad}");
    }
}
