//! forge.yaml `browser:` (how the agent's Chromium is limited and shown); `a2a:` is in `a2a.rs`,
//! read with the same [`Reader`].
//!
//! ```yaml
//! browser:
//!   max_sessions: 8            # live browser sessions (one per conversation); the next is refused
//!   idle_timeout: 15m          # a session unused this long is closed by a timer
//!   navigation_timeout: 45s    # navigate, back, clicks that navigate
//!   action_timeout: 30s        # every other browser action
//!   viewport: {width: 1280, height: 800}
//!   headless: true             # FORGE_BROWSER_HEADLESS still overrides
//!   engine: chromium           # or lightpanda; FORGE_BROWSER_ENGINE still overrides
//!   task_model: {provider: openai, name: gpt-4o-mini}   # browser_task's sub-agent model
//!   profiles: {portal: {origins: ["https://portal.example.com"]}}   # login profiles (profiles.rs)
//!   handoff_timeout: 10m       # how long browser_handoff waits for a person
//!   downloads: {max_bytes: 50MiB, max_files: 20}         # per download / per session
//! ```
//!
//! Every key is optional; a missing key keeps forge's default. The block is read from the
//! position-keeping YAML tree (like `mcp.servers`), so each bad value is a diagnostic pointing at
//! it, saying the rule and the fix. Durations are written like MCP timeouts (`90s`, `15m`,
//! `1m30s`, `1500ms`; a bare number is refused). The environment variables `FORGE_BROWSER_BIN`
//! and `FORGE_BROWSER_HEADLESS` still override what is here (the runtime applies them last).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::{format_duration, parse_duration};
use crate::skill::suggest;
use crate::yaml::{Doc, Kind, Seg};
use crate::SourceDiagnostic;

/// Most live browser sessions `browser.max_sessions` accepts.
pub const MAX_BROWSER_SESSIONS: usize = 64;
/// Longest `browser.idle_timeout`.
pub(crate) const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Longest `browser.navigation_timeout` and `browser.action_timeout`.
pub(crate) const MAX_ACTION_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest `browser.handoff_timeout`.
pub(crate) const MAX_HANDOFF_TIMEOUT: Duration = Duration::from_secs(3600);
const BROWSER_KEYS: &[&str] = &[
    "max_sessions",
    "idle_timeout",
    "navigation_timeout",
    "action_timeout",
    "viewport",
    "headless",
    "task_model",
    "profiles",
    "handoff_timeout",
    "downloads",
    "engine",
];
const DOWNLOADS_KEYS: &[&str] = &["max_bytes", "max_files"];
/// Largest `browser.downloads.max_bytes` (4 GiB).
pub(crate) const MAX_DOWNLOAD_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Largest `browser.downloads.max_files`.
pub(crate) const MAX_DOWNLOAD_FILES: u64 = 1000;
const VIEWPORT_KEYS: &[&str] = &["width", "height"];
const TASK_MODEL_KEYS: &[&str] = &["provider", "name"];

/// `browser`: each field `None` when forge.yaml does not set it (the runtime keeps its default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserSettings {
    /// Live browser sessions at once (1 to [`MAX_BROWSER_SESSIONS`]; default 8).
    pub max_sessions: Option<usize>,
    /// A session unused this long is closed (1 s to 24 h; default 15 min).
    pub idle_timeout: Option<Duration>,
    /// Time limit of navigations (1 s to 10 min; default 45 s).
    pub navigation_timeout: Option<Duration>,
    /// Time limit of other actions (1 s to 10 min; default 30 s).
    pub action_timeout: Option<Duration>,
    /// Viewport `(width, height)` in CSS pixels (200 to 7680 by 200 to 4320; default 1280x800).
    pub viewport: Option<(u32, u32)>,
    /// Headless (default true; `FORGE_BROWSER_HEADLESS` overrides).
    pub headless: Option<bool>,
    /// The model of `browser_task`'s sub-agent (default: the agent's model).
    pub task_model: Option<TaskModel>,
    /// Login profiles (`browser.profiles`, read by `profiles.rs`), in forge.yaml order.
    #[serde(default)]
    pub profiles: Vec<crate::ProfileSpec>,
    /// How long `browser_handoff` waits for a person (1 s to 1 h; default 10 min).
    pub handoff_timeout: Option<Duration>,
    /// `browser.downloads.max_bytes`: the largest download kept (1 KiB to 4 GiB; default 50 MiB).
    #[serde(default)]
    pub download_max_bytes: Option<u64>,
    /// `browser.downloads.max_files`: downloads per session (1 to 1000; default 20).
    #[serde(default)]
    pub download_max_files: Option<usize>,
    /// `browser.engine` (default chromium; `FORGE_BROWSER_ENGINE` overrides).
    #[serde(default)]
    pub engine: Option<BrowserEngine>,
}

/// `browser.engine`: which browser runs the agent's `browser_*` tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BrowserEngine {
    /// Chromium (the default): every browser tool.
    #[default]
    Chromium,
    /// Lightpanda: fast and light, for reading pages and simple forms; no layout, one tab.
    Lightpanda,
}

impl BrowserEngine {
    /// The names `browser.engine` and `FORGE_BROWSER_ENGINE` accept.
    pub const NAMES: [&'static str; 2] = ["chromium", "lightpanda"];

    /// The engine named `s` (exactly as in [`Self::NAMES`]).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chromium" => Some(Self::Chromium),
            "lightpanda" => Some(Self::Lightpanda),
            _ => None,
        }
    }

    /// Its name as written in forge.yaml.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chromium => "chromium",
            Self::Lightpanda => "lightpanda",
        }
    }
}

/// Which engine serves each browser skill of an agent ([`crate::Agent::browser_engines`]).
///
/// The rule: a skill's own `requires.browser_engine` stands; a skill without one runs on the
/// agent's default engine, which is `FORGE_BROWSER_ENGINE` when set, else forge.yaml
/// `browser.engine`, else chromium. (The variable replaces forge.yaml's default only: a skill that
/// asks for chromium may need drag or screenshots, so an operator's variable does not take them away.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrowserEngines {
    /// The agent's default engine (for skills that do not choose one).
    pub default: BrowserEngine,
    /// Each browser skill (in the agent's skill order) and the engine that serves it.
    pub skills: Vec<SkillEngine>,
}

/// One browser skill and its engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillEngine {
    /// The skill's name.
    pub skill: String,
    /// The engine serving its browser tool calls.
    pub engine: BrowserEngine,
    /// Whether the skill chose it itself (`requires.browser_engine`) rather than by default.
    pub explicit: bool,
}

impl BrowserEngines {
    /// The engines the agent's browser skills use, each once, chromium first. Empty for an agent
    /// without browser skills.
    pub fn used(&self) -> Vec<BrowserEngine> {
        let mut out: Vec<BrowserEngine> = Vec::new();
        for e in [BrowserEngine::Chromium, BrowserEngine::Lightpanda] {
            if self.skills.iter().any(|s| s.engine == e) {
                out.push(e);
            }
        }
        out
    }

    /// Whether the browser skills use more than one engine (the browser tools then take a `skill`
    /// argument that picks the engine; docs/browser.md, "Two engines in one agent").
    pub fn is_mixed(&self) -> bool {
        self.used().len() > 1
    }

    /// The engine serving the browser skill `skill` (`None`: no such browser skill).
    pub fn engine_of(&self, skill: &str) -> Option<BrowserEngine> {
        self.skills
            .iter()
            .find(|s| s.skill == skill)
            .map(|s| s.engine)
    }

    /// The engine tool calls use when no skill is named: the default when some skill uses it,
    /// else the one engine every browser skill uses (an agent whose only browser skill asks for
    /// lightpanda runs lightpanda alone).
    pub fn primary(&self) -> BrowserEngine {
        let used = self.used();
        if used.contains(&self.default) || used.is_empty() {
            self.default
        } else {
            used[0]
        }
    }
}

/// `browser.task_model`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskModel {
    /// The provider (`openai`, `anthropic`, `scripted`, ...), as in `model.provider`.
    pub provider: String,
    /// The model name, as in `model.name`.
    pub name: String,
}

/// Reads forge.yaml blocks from the marked tree, collecting errors and warnings (unknown keys);
/// `browser` here, `a2a` in `a2a.rs`.
pub(crate) struct Reader<'d, 'a> {
    doc: &'d Doc<'a>,
    errors: Vec<SourceDiagnostic>,
    warnings: Vec<SourceDiagnostic>,
}

impl<'d, 'a> Reader<'d, 'a> {
    /// A reader of `doc`.
    pub(crate) fn new(doc: &'d Doc<'a>) -> Self {
        Self {
            doc,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The errors and the warnings found.
    pub(crate) fn finish(self) -> (Vec<SourceDiagnostic>, Vec<SourceDiagnostic>) {
        (self.errors, self.warnings)
    }

    fn err(&mut self, msg: String, at: &[Seg<'_>], label: &str, help: String) {
        self.errors.push(
            self.doc
                .diag("forge::config::browser", msg, at, label, Some(help)),
        );
    }

    /// The mapping at `at`: `None` when absent or empty; an error when it is something else.
    pub(crate) fn section(&mut self, at: &[Seg<'_>], what: &str, example: &str) -> bool {
        let Some(node) = self.doc.tree.get(at) else {
            return false;
        };
        match &node.kind {
            Kind::Map(_) => true,
            Kind::Scalar(s) if s.is_empty() => false,
            _ => {
                self.err(
                    format!("forge.yaml `{what}` must be a mapping"),
                    at,
                    "expected a mapping",
                    format!("write it as `{example}` (see docs/browser.md)"),
                );
                false
            }
        }
    }

    pub(crate) fn unknown_keys(&mut self, at: &[Seg<'_>], known: &[&str], where_: &str) {
        let Some(node) = self.doc.tree.get(at) else {
            return;
        };
        for (key, key_node) in node.map_keys() {
            if known.contains(&key) {
                continue;
            }
            let d = self.doc.key_diag(
                "forge::config::unknown-key",
                format!("unknown key `{key}` in forge.yaml `{where_}`; it is ignored"),
                key_node,
                "unknown key",
                Some(format!(
                    "known keys here: {}{}",
                    known.join(", "),
                    suggest(key, known)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default()
                )),
            );
            self.warnings.push(d.warning());
        }
    }

    /// The scalar at `at` (None when absent); a list or mapping is an error.
    fn scalar(&mut self, at: &[Seg<'_>], what: &str, example: &str) -> Option<String> {
        let node = self.doc.tree.get(at)?;
        match &node.kind {
            Kind::Scalar(s) => Some(s.trim().to_string()),
            _ => {
                self.err(
                    format!("forge.yaml `{what}` must be a single value"),
                    at,
                    "expected a single value",
                    format!("write `{example}`"),
                );
                None
            }
        }
    }

    /// A whole number in `min..=max` at `at`.
    pub(crate) fn number(
        &mut self,
        at: &[Seg<'_>],
        what: &str,
        min: u64,
        max: u64,
        default: &str,
    ) -> Option<u64> {
        let example = format!("{}: {default}", what.rsplit('.').next().unwrap_or(what));
        let text = self.scalar(at, what, &example)?;
        match text.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            Ok(n) => {
                self.err(
                    format!("forge.yaml `{what}` is {n}, outside {min} to {max}"),
                    at,
                    "out of range",
                    format!(
                        "use a number from {min} to {max}, or remove the key for the default ({default})"
                    ),
                );
                None
            }
            Err(_) => {
                self.err(
                    format!("forge.yaml `{what}` must be a whole number, not \"{text}\""),
                    at,
                    "not a whole number",
                    format!("write `{example}`"),
                );
                None
            }
        }
    }

    /// A size in bytes in `min..=max` at `at`: a whole number of bytes or one with a unit
    /// (`KiB`, `MiB`, `GiB`, or `KB`, `MB`, `GB` read as the same powers of 1024).
    fn size(
        &mut self,
        at: &[Seg<'_>],
        what: &str,
        min: u64,
        max: u64,
        default: &str,
    ) -> Option<u64> {
        let key = what.rsplit('.').next().unwrap_or(what);
        let text = self.scalar(at, what, &format!("{key}: {default}"))?;
        match parse_size(&text) {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(_) => {
                self.err(
                    format!("forge.yaml `{what}` is {text}, outside 1KiB to 4GiB"),
                    at,
                    "out of range",
                    format!("use a size from 1KiB to 4GiB, or remove the key for the default ({default})"),
                );
                None
            }
            None => {
                self.err(
                    format!("forge.yaml `{what}` is not a size: \"{text}\""),
                    at,
                    "not a size",
                    format!("write bytes or a number with a unit (KiB, MiB, GiB), e.g. `{key}: {default}`"),
                );
                None
            }
        }
    }

    /// A duration in `min..=max` at `at`.
    fn duration(
        &mut self,
        at: &[Seg<'_>],
        what: &str,
        max: Duration,
        default: &str,
    ) -> Option<Duration> {
        let key = what.rsplit('.').next().unwrap_or(what);
        let text = self.scalar(at, what, &format!("{key}: {default}"))?;
        let min = Duration::from_secs(1);
        match parse_duration(&text) {
            Ok(d) if d >= min && d <= max => Some(d),
            Ok(_) => {
                self.err(
                    format!(
                        "forge.yaml `{what}` is {text}, outside 1s to {}",
                        format_duration(max)
                    ),
                    at,
                    "out of range",
                    format!(
                        "use a duration from 1s to {}, or remove the key for the default ({default})",
                        format_duration(max)
                    ),
                );
                None
            }
            Err(why) => {
                self.err(
                    format!("forge.yaml `{what}` is not a duration: {why}"),
                    at,
                    "not a duration",
                    format!(
                        "write a number with a unit (ms, s, m, h), e.g. `{key}: {default}` or `{key}: 1m30s`"
                    ),
                );
                None
            }
        }
    }

    pub(crate) fn browser(&mut self) -> BrowserSettings {
        let mut out = BrowserSettings::default();
        let base = [Seg::Key("browser")];
        if !self.section(
            &base,
            "browser",
            "browser: {max_sessions: 8, idle_timeout: 15m}",
        ) {
            return out;
        }
        self.unknown_keys(&base, BROWSER_KEYS, "browser");
        let (profiles, profile_errors) = crate::profiles::read(self.doc);
        out.profiles = profiles;
        self.errors.extend(profile_errors);
        let at = |k: &'static str| [Seg::Key("browser"), Seg::Key(k)];
        out.max_sessions = self
            .number(
                &at("max_sessions"),
                "browser.max_sessions",
                1,
                MAX_BROWSER_SESSIONS as u64,
                "8",
            )
            .map(|n| n as usize);
        out.idle_timeout = self.duration(
            &at("idle_timeout"),
            "browser.idle_timeout",
            MAX_IDLE_TIMEOUT,
            "15m",
        );
        out.navigation_timeout = self.duration(
            &at("navigation_timeout"),
            "browser.navigation_timeout",
            MAX_ACTION_TIMEOUT,
            "45s",
        );
        out.action_timeout = self.duration(
            &at("action_timeout"),
            "browser.action_timeout",
            MAX_ACTION_TIMEOUT,
            "30s",
        );
        out.handoff_timeout = self.duration(
            &at("handoff_timeout"),
            "browser.handoff_timeout",
            MAX_HANDOFF_TIMEOUT,
            "10m",
        );
        if let Some(h) = self.scalar(&at("headless"), "browser.headless", "headless: true") {
            match h.as_str() {
                "true" => out.headless = Some(true),
                "false" => out.headless = Some(false),
                other => self.err(
                    format!("forge.yaml `browser.headless` must be true or false, not \"{other}\""),
                    &at("headless"),
                    "not true or false",
                    "write `headless: true` (the default) or `headless: false` (a visible window, for local debugging)".into(),
                ),
            }
        }
        if let Some(e) = self.scalar(&at("engine"), "browser.engine", "engine: chromium") {
            match BrowserEngine::parse(&e) {
                Some(engine) => out.engine = Some(engine),
                None => self.err(
                    format!(
                        "forge.yaml `browser.engine` must be one of {}, not \"{e}\"",
                        BrowserEngine::NAMES.join(", ")
                    ),
                    &at("engine"),
                    "not a known engine",
                    "write `engine: chromium` (the default: every browser tool) or `engine: lightpanda` (reading and simple forms; see docs/browser.md)".into(),
                ),
            }
        }
        let vp = [Seg::Key("browser"), Seg::Key("viewport")];
        if self.section(
            &vp,
            "browser.viewport",
            "viewport: {width: 1280, height: 800}",
        ) {
            self.unknown_keys(&vp, VIEWPORT_KEYS, "browser.viewport");
            let at_vp = |k: &'static str| [Seg::Key("browser"), Seg::Key("viewport"), Seg::Key(k)];
            let present = |r: &Self, k: &'static str| r.doc.tree.get(&at_vp(k)).is_some();
            let (has_w, has_h) = (present(self, "width"), present(self, "height"));
            if !(has_w && has_h) {
                let missing = if has_w { "height" } else { "width" };
                self.err(
                    format!("forge.yaml `browser.viewport` has no `{missing}`"),
                    &vp,
                    "width and height are both needed",
                    "write `viewport: {width: 1280, height: 800}`".into(),
                );
            }
            let w = self.number(&at_vp("width"), "browser.viewport.width", 200, 7680, "1280");
            let h = self.number(
                &at_vp("height"),
                "browser.viewport.height",
                200,
                4320,
                "800",
            );
            if let (Some(w), Some(h)) = (w, h) {
                out.viewport = Some((w as u32, h as u32));
            }
        }
        let dl = [Seg::Key("browser"), Seg::Key("downloads")];
        if self.section(
            &dl,
            "browser.downloads",
            "downloads: {max_bytes: 50MiB, max_files: 20}",
        ) {
            self.unknown_keys(&dl, DOWNLOADS_KEYS, "browser.downloads");
            let at_dl = |k: &'static str| [Seg::Key("browser"), Seg::Key("downloads"), Seg::Key(k)];
            out.download_max_bytes = self.size(
                &at_dl("max_bytes"),
                "browser.downloads.max_bytes",
                1024,
                MAX_DOWNLOAD_BYTES,
                "50MiB",
            );
            out.download_max_files = self
                .number(
                    &at_dl("max_files"),
                    "browser.downloads.max_files",
                    1,
                    MAX_DOWNLOAD_FILES,
                    "20",
                )
                .map(|n| n as usize);
        }
        let tm = [Seg::Key("browser"), Seg::Key("task_model")];
        if self.section(
            &tm,
            "browser.task_model",
            "task_model: {provider: openai, name: gpt-4o-mini}",
        ) {
            self.unknown_keys(&tm, TASK_MODEL_KEYS, "browser.task_model");
            let at_tm =
                |k: &'static str| [Seg::Key("browser"), Seg::Key("task_model"), Seg::Key(k)];
            let provider = self.scalar(
                &at_tm("provider"),
                "browser.task_model.provider",
                "provider: openai",
            );
            let name = self.scalar(
                &at_tm("name"),
                "browser.task_model.name",
                "name: gpt-4o-mini",
            );
            match (provider, name) {
                (Some(p), Some(n)) if !p.is_empty() && !n.is_empty() => {
                    out.task_model = Some(TaskModel {
                        provider: p,
                        name: n,
                    })
                }
                (p, _) => {
                    let missing = if p.as_deref().is_none_or(str::is_empty) {
                        "provider"
                    } else {
                        "name"
                    };
                    self.err(
                        format!("forge.yaml `browser.task_model` has no `{missing}`"),
                        &tm,
                        "provider and name are both needed",
                        "write `task_model: {provider: openai, name: gpt-4o-mini}`, or remove it to use the agent's model".into(),
                    );
                }
            }
        }
        out
    }
}

/// `50MiB`, `1 MiB`, `512KB`, `1048576`: bytes (a unit's K, M, G are powers of 1024), or None.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}
