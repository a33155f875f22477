//! The hash-chained NDJSON audit log: one JSON object per line, each carrying its sequence number
//! and a SHA-256 hash that chains it to the line before, so that an altered, inserted or removed
//! line is detected by [`verify`] (`forge audit verify FILE`).
//!
//! Line format (the `hash` key always comes first, so the hashed bytes are exactly what is on disk):
//!
//! ```text
//! {"hash":"<64 hex>","event":"tool_exec","prev_hash":"<64 hex>","seq":3,"task_id":"...","time":"...",...}
//! ```
//!
//! `hash = sha256(prev_hash_hex || body)` where `body` is the line with the leading
//! `"hash":"<64 hex>",` member removed (that is, `{` followed by the rest of the line). The first line
//! of a file has `seq` 1 and a `prev_hash` of 64 zeros. Appending to an existing file continues its
//! chain. Every string value passes through a scrubber that replaces the values of secret-looking
//! environment variables (API keys, tokens, passwords), any registered secret, `Bearer` tokens and
//! credential-named URL query parameters with `[SECRET]`, so no secret value reaches the log even
//! by accident.
//!
//! Removing the *last* lines of a log cannot be detected from the chain alone; [`verify`] reports
//! whether every `session_start` has its `session_end`, which exposes a cut-off `--once` run.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Event names written by the runtime.
pub mod events {
    /// A task (session) starts: agent, provider, model, tool count.
    pub const SESSION_START: &str = "session_start";
    /// A task ends: status, iterations, duration.
    pub const SESSION_END: &str = "session_end";
    /// One model request (after retries): provider, model, host, status, tokens, duration.
    pub const LLM_CALL: &str = "llm_call";
    /// One tool execution: tool, outcome, sizes, duration (never the argument values).
    pub const TOOL_EXEC: &str = "tool_exec";
    /// One call of an MCP server's tool (`<server>__<tool>`): the same fields as `tool_exec`.
    pub const MCP_TOOL_CALL: &str = "mcp_tool_call";
    /// The event of a call of tool `name`: [`MCP_TOOL_CALL`] for an MCP tool, else [`TOOL_EXEC`].
    pub fn tool_call_event(name: &str) -> &'static str {
        if forge_skills::is_mcp_tool_name(name) {
            MCP_TOOL_CALL
        } else {
            TOOL_EXEC
        }
    }
    /// The egress policy allowed a connection.
    pub const EGRESS_ALLOWED: &str = "egress_allowed";
    /// The egress policy refused a connection.
    pub const EGRESS_BLOCKED: &str = "egress_blocked";
    /// A guardrail looked at a prompt, tool input/output or response and acted.
    pub const GUARDRAIL_CHECK: &str = "guardrail_check";
    /// Chromium was launched.
    pub const BROWSER_LAUNCH: &str = "browser_launch";
    /// A task's browser session (its own browser context) was opened.
    pub const BROWSER_SESSION_OPEN: &str = "browser_session_open";
    /// A task's browser session was closed.
    pub const BROWSER_SESSION_CLOSE: &str = "browser_session_close";
    /// Chromium died without being asked to (killed, out of memory, hung and killed): the
    /// reason, its pid, the sessions whose pages went with it, whether it is being relaunched.
    pub const BROWSER_CRASH: &str = "browser_crash";
    /// A task stopped because the server shut down before it finished (`reason`).
    pub const TASK_INTERRUPTED: &str = "task_interrupted";
    /// A task's browser context started from a login profile (`profile`, `version`, counts of
    /// cookies and storage origins; never a value).
    pub const PROFILE_LOAD: &str = "profile_load";
    /// A task's login profile was saved back (`profile`, `saved`, `version` or why not).
    pub const PROFILE_SAVE: &str = "profile_save";
    /// `browser_handoff` handed a tab to a person: the hand-off id (the token id, never the
    /// token), the reason, the timeout.
    pub const HANDOFF_START: &str = "handoff_start";
    /// A hand-off ended: its id, the outcome (`done`, `cancelled`, `timeout`, `abandoned`), who
    /// finished it (the token id) and how long it took.
    pub const HANDOFF_END: &str = "handoff_end";
}

/// The `prev_hash` of the first line of a log.
pub(crate) const GENESIS_HASH: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// Keys every line has; event fields with these names are dropped (they would be ambiguous).
const RESERVED: [&str; 6] = ["hash", "prev_hash", "seq", "time", "event", "task_id"];

const HASH_PREFIX: &str = "{\"hash\":\"";

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The file could not be opened or read.
    #[error("cannot open audit file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file exists but its last line is not a forge audit line, so the chain cannot continue.
    #[error(
        "{path} is not a forge audit log (its last line has no valid hash chain fields); \
         choose another --audit-file or move this file away"
    )]
    NotAnAuditLog {
        /// The file.
        path: PathBuf,
    },
}

struct Inner {
    out: Box<dyn Write + Send>,
    prev_hash: String,
    seq: u64,
}

impl Inner {
    /// Write `body` (an event's JSON object, its `seq` and `prev_hash` included) as the chain's
    /// next line; the line's hash, now the chain's head.
    fn append(&mut self, body: &str, event: &str) -> String {
        let hash = chain_hash(&self.prev_hash, body);
        // body always starts with '{' and has at least the seq and prev_hash members.
        let line = format!("{HASH_PREFIX}{hash}\",{}\n", body.get(1..).unwrap_or(""));
        let res = self
            .out
            .write_all(line.as_bytes())
            .and_then(|_| self.out.flush());
        if let Err(e) = res {
            tracing::error!("cannot write audit event {event}: {e}");
        }
        self.prev_hash = hash.clone();
        hash
    }
}

/// The audit log writer. Cheap to clone; all clones append to the same chain.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Mutex<Inner>>,
    scrubber: Arc<Mutex<Scrubber>>,
    /// Every event with a task id, kept for the watch page (ui/tap.rs).
    tap: Arc<crate::ui::tap::Tap>,
    /// The file the log is appended to, when it is one (the watch page verifies it).
    path: Option<Arc<PathBuf>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

impl AuditLog {
    /// A log written to standard error.
    pub fn stderr() -> Self {
        Self::to_writer(Box::new(std::io::stderr()))
    }

    /// A log written to `out`, starting a new chain.
    pub fn to_writer(out: Box<dyn Write + Send>) -> Self {
        Self::with_chain(out, GENESIS_HASH.to_string(), 0)
    }

    /// A log appended to `path` (created if missing); an existing log's chain is continued.
    pub fn open_file(path: &Path) -> Result<Self, AuditError> {
        let io_err = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io_err)?;
        let (prev, seq) = match last_line(&mut file).map_err(io_err)? {
            None => (GENESIS_HASH.to_string(), 0),
            Some(line) => {
                let (hash, body) = split_line(&line).ok_or_else(|| AuditError::NotAnAuditLog {
                    path: path.to_path_buf(),
                })?;
                let seq = serde_json::from_str::<Value>(body.as_str())
                    .ok()
                    .and_then(|v| v.get("seq").and_then(Value::as_u64))
                    .ok_or_else(|| AuditError::NotAnAuditLog {
                        path: path.to_path_buf(),
                    })?;
                (hash.to_string(), seq)
            }
        };
        let mut log = Self::with_chain(Box::new(file), prev, seq);
        log.path = Some(Arc::new(path.to_path_buf()));
        Ok(log)
    }

    /// The watch page's per-task record of this log's events.
    pub(crate) fn tap(&self) -> &Arc<crate::ui::tap::Tap> {
        &self.tap
    }

    /// The file this log is appended to, when it is one.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.path.as_deref().map(PathBuf::as_path)
    }

    /// Give the watch page an event of `task_id` that the log file does not keep (a tool call's
    /// arguments, the model's text): scrubbed exactly as a logged event, never written.
    pub(crate) fn watch_only(&self, task_id: &str, event: &str, fields: Value) {
        let mut value = fields;
        if let Value::Object(m) = &mut value {
            m.insert("event".into(), Value::String(event.to_string()));
            m.insert("task_id".into(), Value::String(task_id.to_string()));
            m.insert("time".into(), Value::String(rfc3339_now()));
            m.insert("unlogged".into(), Value::Bool(true));
        }
        if let Ok(s) = self.scrubber.lock() {
            s.scrub(&mut value);
        }
        self.tap.record(task_id, &value);
    }

    fn with_chain(out: Box<dyn Write + Send>, prev_hash: String, seq: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                out,
                prev_hash,
                seq,
            })),
            scrubber: Arc::new(Mutex::new(Scrubber::from_env())),
            tap: Arc::new(crate::ui::tap::Tap::default()),
            path: None,
        }
    }

    /// Never write `secret` into the log (it is replaced by `[SECRET]` wherever it appears).
    pub fn add_secret(&self, secret: &str) {
        if let Ok(mut s) = self.scrubber.lock() {
            s.add(secret);
        }
    }

    /// Never write forge.yaml secret `name`'s `value` into the log: it is replaced by
    /// `(secret NAME)` wherever it appears, whatever its length.
    pub fn add_named_secret(&self, name: &str, value: &str) {
        if value.is_empty() {
            return;
        }
        if let Ok(mut s) = self.scrubber.lock() {
            s.named
                .push((value.to_string(), format!("(secret {name})")));
            s.named.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        }
    }

    /// Append one event. `fields` should be a JSON object; its members become top-level keys
    /// (reserved keys are dropped). Write failures are reported through `tracing`, not returned:
    /// auditing never aborts the work it describes.
    pub fn emit(&self, task_id: Option<&str>, event: &str, fields: Value) {
        // The caller's object is kept as it is (no second map built), less the reserved keys.
        let mut obj = match fields {
            Value::Object(mut m) => {
                for k in RESERVED {
                    m.remove(k);
                }
                m
            }
            Value::Null => Map::new(),
            other => {
                let mut m = Map::new();
                m.insert("detail".into(), other);
                m
            }
        };
        obj.insert("event".into(), Value::String(event.to_string()));
        obj.insert(
            "task_id".into(),
            task_id.map_or(Value::Null, |t| Value::String(t.into())),
        );
        obj.insert("time".into(), Value::String(rfc3339_now()));
        let mut value = Value::Object(obj);
        if let Ok(s) = self.scrubber.lock() {
            s.scrub(&mut value);
        }
        let Ok(mut inner) = self.inner.lock() else {
            tracing::error!("audit log lock poisoned; event {event} not written");
            return;
        };
        inner.seq += 1;
        if let Value::Object(m) = &mut value {
            m.insert("seq".into(), Value::from(inner.seq));
            m.insert("prev_hash".into(), Value::String(inner.prev_hash.clone()));
        }
        let body = value.to_string();
        let hash = inner.append(&body, event);
        drop(inner);
        if let Some(t) = task_id {
            if let Value::Object(m) = &mut value {
                m.insert("hash".into(), Value::String(hash));
            }
            self.tap.record(t, &value);
        }
    }
}

/// A field of [`AuditLog::emit_flat`].
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    /// A string (scrubbed like every string of an event).
    Str(&'a str),
    /// A number.
    U64(u64),
    /// `null`.
    Null,
}

impl AuditLog {
    /// [`AuditLog::emit`] for an event whose fields are strings, numbers and nulls, without
    /// building a JSON value first: the line is written straight from `fields`, with the same
    /// members in the same (sorted) order, the same scrubbing and the same chain, as `emit` of the
    /// equivalent object writes. For events written per request (the egress proxy's
    /// `egress_allowed`, on the proxy's thread). Reserved keys in `fields` are dropped; of a key
    /// given twice, the last counts.
    pub fn emit_flat(&self, task_id: Option<&str>, event: &str, fields: &[(&str, Field<'_>)]) {
        enum Val {
            Str(String),
            U64(u64),
            Null,
        }
        let scrubber = self.scrubber.lock().ok();
        let scrubbed = |v: &str| {
            let mut s = v.to_string();
            if let Some(sc) = &scrubber {
                sc.scrub_str(&mut s);
            }
            Val::Str(s)
        };
        let mut members: Vec<(&str, Val)> = Vec::with_capacity(fields.len() + 5);
        for (k, v) in fields {
            if RESERVED.contains(k) {
                continue;
            }
            let v = match v {
                Field::Str(s) => scrubbed(s),
                Field::U64(n) => Val::U64(*n),
                Field::Null => Val::Null,
            };
            members.push((k, v));
        }
        members.push(("event", scrubbed(event)));
        members.push(("task_id", task_id.map_or(Val::Null, scrubbed)));
        members.push(("time", scrubbed(&rfc3339_now())));
        drop(scrubber);
        // Sorted by key as a JSON object's members are; of equal keys the last given counts.
        members.reverse();
        members.sort_by(|a, b| a.0.cmp(b.0));
        members.dedup_by(|later, earlier| later.0 == earlier.0);
        let Ok(mut inner) = self.inner.lock() else {
            tracing::error!("audit log lock poisoned; event {event} not written");
            return;
        };
        inner.seq += 1;
        let (seq, prev) = (inner.seq, inner.prev_hash.clone());
        let pos = members.partition_point(|(k, _)| *k < "prev_hash");
        members.insert(pos, ("prev_hash", Val::Str(prev)));
        let pos = members.partition_point(|(k, _)| *k < "seq");
        members.insert(pos, ("seq", Val::U64(seq)));
        let mut body = String::with_capacity(320);
        body.push('{');
        for (i, (k, v)) in members.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            push_json_str(&mut body, k);
            body.push(':');
            match v {
                Val::Str(s) => push_json_str(&mut body, s),
                Val::U64(n) => body.push_str(&n.to_string()),
                Val::Null => body.push_str("null"),
            }
        }
        body.push('}');
        let hash = inner.append(&body, event);
        drop(inner);
        if let Some(t) = task_id {
            if let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(&body) {
                m.insert("hash".into(), Value::String(hash));
                self.tap.record(t, &Value::Object(m));
            }
        }
    }
}

/// Append `s` as a JSON string, escaped exactly as serde_json writes a string value.
fn push_json_str(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(q) => out.push_str(&q),
        // A &str always serializes; were it to fail, an empty string keeps the line valid JSON.
        Err(_) => out.push_str("\"\""),
    }
}

/// Each use of a secret by a tool becomes a `secret_use` event (name, origin, tool; never the
/// value).
impl forge_tools::SecretUseSink for AuditLog {
    fn used(&self, task_id: Option<&str>, name: &str, origin: &str, tool: &str) {
        self.emit(
            task_id,
            "secret_use",
            serde_json::json!({"secret": name, "origin": origin, "tool": tool}),
        );
    }
}

/// The browser's crash hook: each crash becomes a `browser_crash` event.
impl forge_browser::CrashObserver for AuditLog {
    fn on_crash(&self, crash: &forge_browser::BrowserCrash) {
        self.emit(
            None,
            events::BROWSER_CRASH,
            serde_json::json!({
                "reason": crash.reason,
                "pid": crash.pid,
                "sessions": crash.sessions,
                "relaunching": crash.relaunching,
            }),
        );
    }
}

fn chain_hash(prev: &str, body: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(body.as_bytes());
    lower_hex(&h.finalize())
}

/// Lowercase hex of `bytes`, written straight into one string (`hex::encode` collects `char`s
/// one by one: a visible share of an audit event's cost on the egress proxy's thread).
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Split a line into its hash and its body (`{` + the rest after the hash member).
fn split_line(line: &str) -> Option<(&str, String)> {
    let rest = line.strip_prefix(HASH_PREFIX)?;
    let hash = rest.get(..64)?;
    if !hash
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    let after = rest.get(64..)?.strip_prefix("\",")?;
    Some((hash, format!("{{{after}")))
}

fn last_line(file: &mut File) -> std::io::Result<Option<String>> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    // Lines are small; read at most the last 1 MiB.
    let start = len.saturating_sub(1 << 20);
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string))
}

/// What a successful [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySummary {
    /// Number of lines (events) checked.
    pub events: u64,
    /// The hash of the last line (the chain head), to compare with a copy kept elsewhere.
    pub head: String,
    /// Number of `session_start` events.
    pub sessions_started: u64,
    /// Number of `session_end` events.
    pub sessions_ended: u64,
    /// Count per event name, sorted by name.
    pub counts: Vec<(String, u64)>,
    /// Hosts named by `egress_blocked` events, sorted, de-duplicated.
    pub blocked_hosts: Vec<String>,
}

/// Why a log failed verification: the 1-based line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct VerifyError {
    /// The 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub reason: String,
}

/// Check the hash chain of a log: every line well formed, `seq` increasing by one from 1,
/// `prev_hash` equal to the previous line's hash (zeros for the first), and `hash` correct.
pub fn verify(reader: impl BufRead) -> Result<VerifySummary, VerifyError> {
    let mut prev = GENESIS_HASH.to_string();
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    let mut blocked = std::collections::BTreeSet::<String>::new();
    let mut lineno = 0u64;
    for (idx, line) in reader.lines().enumerate() {
        lineno = idx as u64 + 1;
        let err = |reason: String| VerifyError {
            line: lineno,
            reason,
        };
        let line = line.map_err(|e| err(format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            return Err(err(
                "empty line (lines were removed or the file was edited)".into(),
            ));
        }
        let (hash, body) = split_line(&line).ok_or_else(|| {
            err("not an audit line: it must start with {\"hash\":\"<64 hex>\",".into())
        })?;
        let value: Value =
            serde_json::from_str(&body).map_err(|e| err(format!("not valid JSON: {e}")))?;
        let seq = value
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or_else(|| err("no seq".into()))?;
        if seq != lineno {
            return Err(err(format!(
                "seq is {seq}, expected {lineno} (a line was removed, inserted or reordered)"
            )));
        }
        let line_prev = value
            .get("prev_hash")
            .and_then(Value::as_str)
            .ok_or_else(|| err("no prev_hash".into()))?;
        if line_prev != prev {
            return Err(err(
                "prev_hash does not match the previous line's hash (chain broken: a line before \
                 it was altered or removed)"
                    .into(),
            ));
        }
        let computed = chain_hash(&prev, &body);
        if computed != hash {
            return Err(err(
                "hash does not match the line's content (the line was altered)".into(),
            ));
        }
        let event = value
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if event == events::EGRESS_BLOCKED {
            if let Some(h) = value.get("host").and_then(Value::as_str) {
                blocked.insert(h.to_string());
            }
        }
        *counts.entry(event).or_default() += 1;
        prev = hash.to_string();
    }
    if lineno == 0 {
        return Err(VerifyError {
            line: 0,
            reason: "the log is empty".into(),
        });
    }
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    Ok(VerifySummary {
        events: lineno,
        head: prev,
        sessions_started: get(events::SESSION_START),
        sessions_ended: get(events::SESSION_END),
        counts: counts.into_iter().collect(),
        blocked_hosts: blocked.into_iter().collect(),
    })
}

/// [`verify`] on a file.
pub fn verify_file(path: &Path) -> Result<VerifySummary, VerifyError> {
    let file = File::open(path).map_err(|e| VerifyError {
        line: 0,
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    verify(BufReader::new(file))
}

/// Replaces secret values with `[SECRET]` in every string of an event.
#[derive(Default)]
struct Scrubber {
    secrets: Vec<String>,
    /// forge.yaml secrets: (value, `(secret NAME)`), longest value first, any length.
    named: Vec<(String, String)>,
}

/// Credential shapes scrubbed from every string even when forge does not know the value:
/// `Bearer <token>`, and URL query parameters whose name says key/token/secret/password/signature.
/// The credential patterns, their replacements, and for each a cheap test that a string must
/// pass to possibly match it (most strings of an event fail it, and skip the regex).
type CredentialPattern = (regex::Regex, &'static str, fn(&str) -> bool);

fn credential_patterns() -> &'static [CredentialPattern] {
    static PATTERNS: std::sync::OnceLock<Vec<CredentialPattern>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        let bearer: fn(&str) -> bool = |s| {
            // `(?i)bearer`: no other character folds to b, e, a or r, so ASCII case is all.
            s.as_bytes()
                .windows(6)
                .any(|w| w.eq_ignore_ascii_case(b"bearer"))
        };
        let query: fn(&str) -> bool = |s| s.contains('=') && s.contains(['?', '&']);
        [
            (r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}", "$1 [SECRET]", bearer),
            (
                r"(?i)([?&][a-z0-9_.-]*(?:key|token|secret|password|passwd|sig|signature|auth)[a-z0-9_.-]*=)[^&#\s\x22']+",
                "${1}[SECRET]",
                query,
            ),
        ]
        .into_iter()
        // The patterns are constants that compile; a failure would only drop that pattern.
        .filter_map(|(p, w, maybe)| regex::Regex::new(p).ok().map(|r| (r, w, maybe)))
        .collect()
    })
}

/// Environment variable names whose values are treated as secrets.
fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| n.contains(w))
}

impl Scrubber {
    /// Every string of an event passes through here.
    fn scrub_str(&self, s: &mut String) {
        for (value, with) in &self.named {
            if s.contains(value.as_str()) {
                *s = s.replace(value.as_str(), with);
            }
        }
        for secret in &self.secrets {
            if s.contains(secret.as_str()) {
                *s = s.replace(secret.as_str(), "[SECRET]");
            }
        }
        for (re, with, maybe) in credential_patterns() {
            if maybe(s) && re.is_match(s) {
                *s = re.replace_all(s, *with).into_owned();
            }
        }
    }

    fn from_env() -> Self {
        let mut s = Scrubber::default();
        for (k, v) in std::env::vars_os() {
            if let (Some(k), Some(v)) = (k.to_str(), v.to_str()) {
                if is_secret_name(k) {
                    s.add(v);
                }
            }
        }
        s
    }

    fn add(&mut self, secret: &str) {
        // Very short values would blank out ordinary words; real credentials are longer.
        if secret.len() >= 6 && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_string());
            // Longest first, so a secret containing another is replaced whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    fn scrub(&self, v: &mut Value) {
        match v {
            Value::String(s) => self.scrub_str(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.scrub(x)),
            Value::Object(m) => m.values_mut().for_each(|x| self.scrub(x)),
            _ => {}
        }
    }
}

/// The current UTC time as RFC 3339 with milliseconds (`2026-11-22T17:45:07.123Z`; forge-time
/// holds the one formatter).
pub(crate) fn rfc3339_now() -> String {
    forge_time::now_rfc3339_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn emit_flat_writes_what_emit_writes_and_keeps_the_chain() {
        let out = Shared::default();
        let log = AuditLog::to_writer(Box::new(out.clone()));
        log.add_secret("s3cr3t-value");
        let host = "api.s3cr3t-value.example";
        let reason = "entry `x` with \"quotes\", a \\ and ?token=abcdefgh";
        log.emit(
            Some("t1"),
            "egress_allowed",
            serde_json::json!({"via": "proxy", "method": "GET", "host": host, "port": 443, "ip": null,
                   "reason": reason, "bytes_down": 10, "seq": 99}),
        );
        log.emit_flat(
            Some("t1"),
            "egress_allowed",
            &[
                ("via", Field::Str("proxy")),
                ("method", Field::Str("GET")),
                ("host", Field::Str(host)),
                ("port", Field::U64(443)),
                ("ip", Field::Null),
                ("reason", Field::Str(reason)),
                ("bytes_down", Field::U64(10)),
                ("seq", Field::U64(99)),
            ],
        );
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        // The same bytes once prev_hash, seq and time are blanked (the chain and the clock
        // differ between the two): same members, order, escaping and scrubbing.
        let blank = |l: &str| {
            let (_, body) = split_line(l).unwrap();
            let re = regex::Regex::new(r#""prev_hash":"[0-9a-f]{64}"|"seq":[0-9]+|"time":"[^"]*""#)
                .unwrap();
            (body.clone(), re.replace_all(&body, "_").into_owned())
        };
        let ((_, v1), (b2, v2)) = (blank(lines[0]), blank(lines[1]));
        assert_eq!(v1, v2);
        assert!(
            !text.contains("s3cr3t-value") && !text.contains("abcdefgh"),
            "{text}"
        );
        assert!(b2.contains("\"seq\":2"), "{b2}");
        let summary = verify(text.as_bytes()).unwrap();
        assert_eq!(summary.events, 2);
        // The watch page got both, with their hashes.
        let tapped = log.tap().events("t1").unwrap().events;
        assert_eq!(tapped.len(), 2);
        assert_eq!(tapped[1]["host"], tapped[0]["host"]);
        assert!(tapped[1]["hash"].is_string());
    }

    #[test]
    fn lower_hex_is_what_hex_encode_gives() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        assert_eq!(lower_hex(&bytes), hex::encode(&bytes));
        assert_eq!(lower_hex(&[]), "");
    }

    #[test]
    fn a_string_a_credential_pattern_matches_passes_its_cheap_test() {
        let samples = [
            "Authorization: Bearer abcdefgh12345",
            "BEARER abcdefghij",
            "x bEaReR\tzzzzzzzzzz",
            "https://h/p?api_key=123456",
            "https://h/p?a=1&Token=xyz",
            "?\u{212a}ey=1",
            "&session_sig=abc",
        ];
        for s in samples {
            let hits: Vec<bool> = credential_patterns()
                .iter()
                .map(|(re, _, maybe)| !re.is_match(s) || maybe(s))
                .collect();
            assert!(hits.iter().all(|h| *h), "{s}: {hits:?}");
            assert!(
                credential_patterns()
                    .iter()
                    .any(|(re, _, _)| re.is_match(s)),
                "{s} is a sample of a pattern"
            );
        }
    }

    #[test]
    fn every_credential_pattern_compiles() {
        assert_eq!(credential_patterns().len(), 2);
    }

    #[test]
    fn split_line_rejects_uppercase_and_short_hashes() {
        let h = "a".repeat(64);
        assert!(split_line(&format!("{{\"hash\":\"{h}\",\"seq\":1}}")).is_some());
        assert!(split_line(&format!("{{\"hash\":\"{}\",\"seq\":1}}", "A".repeat(64))).is_none());
        assert!(split_line("{\"hash\":\"abc\",\"seq\":1}").is_none());
    }
}
