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
    /// What the watch page's last check of that file verified (see [`verify_file_since`]); held
    /// while a check runs, so concurrent views check one after another and each resumes.
    verified: Arc<Mutex<Option<Verified>>>,
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

    /// What the last check of this log's file verified, for the next check to resume from.
    pub(crate) fn verified(&self) -> Arc<Mutex<Option<Verified>>> {
        self.verified.clone()
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
            verified: Arc::new(Mutex::new(None)),
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
    let mut v = Verifier::default();
    for line in reader.lines() {
        let line = line.map_err(|e| VerifyError {
            line: v.lineno + 1,
            reason: format!("cannot read: {e}"),
        })?;
        v.line(&line)?;
    }
    v.summary()
}

/// [`verify`]'s state after some lines, so that a check can resume where an earlier one ended
/// ([`verify_file_since`]).
#[derive(Debug, Clone)]
pub(crate) struct Verifier {
    prev: String,
    counts: std::collections::BTreeMap<String, u64>,
    blocked: std::collections::BTreeSet<String>,
    lineno: u64,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            prev: GENESIS_HASH.to_string(),
            counts: Default::default(),
            blocked: Default::default(),
            lineno: 0,
        }
    }
}

impl Verifier {
    /// Check the next line (without its newline); its hash when it holds.
    fn line(&mut self, line: &str) -> Result<String, VerifyError> {
        self.lineno += 1;
        let lineno = self.lineno;
        let err = |reason: String| VerifyError {
            line: lineno,
            reason,
        };
        if line.trim().is_empty() {
            return Err(err(
                "empty line (lines were removed or the file was edited)".into(),
            ));
        }
        let (hash, body) = split_line(line).ok_or_else(|| {
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
        if line_prev != self.prev {
            return Err(err(
                "prev_hash does not match the previous line's hash (chain broken: a line before \
                 it was altered or removed)"
                    .into(),
            ));
        }
        let computed = chain_hash(&self.prev, &body);
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
                self.blocked.insert(h.to_string());
            }
        }
        *self.counts.entry(event).or_default() += 1;
        self.prev = computed;
        Ok(self.prev.clone())
    }

    /// The summary of the lines checked so far (an error for none: an empty log).
    fn summary(&self) -> Result<VerifySummary, VerifyError> {
        if self.lineno == 0 {
            return Err(VerifyError {
                line: 0,
                reason: "the log is empty".into(),
            });
        }
        let get = |k: &str| self.counts.get(k).copied().unwrap_or(0);
        Ok(VerifySummary {
            events: self.lineno,
            head: self.prev.clone(),
            sessions_started: get(events::SESSION_START),
            sessions_ended: get(events::SESSION_END),
            counts: self.counts.iter().map(|(k, n)| (k.clone(), *n)).collect(),
            blocked_hosts: self.blocked.iter().cloned().collect(),
        })
    }
}

/// [`verify`] on a file.
pub fn verify_file(path: &Path) -> Result<VerifySummary, VerifyError> {
    let file = File::open(path).map_err(|e| VerifyError {
        line: 0,
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    verify(BufReader::new(file))
}

/// What a check of an audit file keeps for the next one ([`verify_file_since`]): the file (device
/// and inode), how many of its bytes verified (whole lines), their SHA-256, and the chain's state
/// after them.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    id: (u64, u64),
    len: u64,
    digest: [u8; 32],
    state: Verifier,
}

/// The outcome of [`verify_file_since`].
#[derive(Debug)]
pub(crate) struct FileCheck {
    /// What [`verify_file`] gives for the file.
    pub result: Result<VerifySummary, VerifyError>,
    /// How many of the wanted events are in the file with the hash they were recorded with.
    pub found: usize,
    /// Lines checked one by one (parsed and chained); the lines of an unchanged prefix are only
    /// hashed.
    pub parsed: u64,
}

/// [`verify_file`], plus how many of `wanted` (sequence number -> hash, as the watch page recorded
/// a task's events) are in the file as recorded. With `since` from an earlier check of the same
/// file (same device and inode, not shorter), the bytes that verified then are read again and
/// hashed with SHA-256 instead of parsed: if their digest is unchanged, only the lines after them
/// are checked one by one; if any byte of them changed, the whole file is checked as
/// `verify_file` checks it. So the result is `verify_file`'s either way, at a fraction of the cost
/// for a long log that only grew (the watch page checks it on every task view). `since` is left
/// for the next check (none after an error, or when the file does not end with a newline).
pub(crate) fn verify_file_since(
    path: &Path,
    wanted: &std::collections::HashMap<u64, String>,
    since: &mut Option<Verified>,
) -> FileCheck {
    let failed = |reason: String| FileCheck {
        result: Err(VerifyError { line: 0, reason }),
        found: 0,
        parsed: 0,
    };
    let earlier = since.take();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return failed(format!("cannot open {}: {e}", path.display())),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return failed(format!("cannot read {}: {e}", path.display())),
    };
    let id = file_id(&meta);
    let mut reader = BufReader::new(file);
    let mut start = (Verifier::default(), Sha256::new(), 0u64, 0usize);
    if let Some(prev) = earlier.filter(|p| Some(p.id) == id && p.len <= meta.len()) {
        let mut found = 0;
        match unchanged_prefix(&mut reader, &prev, wanted, &mut found) {
            Ok(Some(hasher)) => start = (prev.state, hasher, prev.len, found),
            // Changed (or unreadable): check every line from the start.
            Ok(None) | Err(_) => {
                if let Err(e) = reader.seek(SeekFrom::Start(0)) {
                    return failed(format!("cannot read {}: {e}", path.display()));
                }
            }
        }
    }
    let (mut state, mut hasher, mut len, mut found) = start;
    let mut parsed = 0u64;
    let mut whole_lines = true;
    let mut buf = Vec::new();
    // Bounded by the file's length: each pass consumes at least one byte.
    loop {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                return FileCheck {
                    result: Err(VerifyError {
                        line: state.lineno + 1,
                        reason: format!("cannot read: {e}"),
                    }),
                    found,
                    parsed,
                }
            }
        };
        whole_lines = buf.last() == Some(&b'\n');
        // What `BufRead::lines` gives: the line without "\n" or "\r\n".
        let mut text = buf.as_slice();
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t.strip_suffix(b"\r").unwrap_or(t);
        }
        let checked = match std::str::from_utf8(text) {
            Ok(t) => state.line(t),
            Err(_) => Err(VerifyError {
                line: state.lineno + 1,
                reason: "cannot read: stream did not contain valid UTF-8".into(),
            }),
        };
        parsed += 1;
        match checked {
            Ok(hash) => {
                if wanted.get(&state.lineno) == Some(&hash) {
                    found += 1;
                }
            }
            Err(e) => {
                return FileCheck {
                    result: Err(e),
                    found,
                    parsed,
                }
            }
        }
        hasher.update(&buf);
        len += n as u64;
    }
    let result = state.summary();
    if let (Ok(_), Some(id), true) = (&result, id, whole_lines) {
        *since = Some(Verified {
            id,
            len,
            digest: hasher.finalize().into(),
            state,
        });
    }
    FileCheck {
        result,
        found,
        parsed,
    }
}

/// Read the `prev.len` bytes that verified last time, hashing them; the hasher if their digest
/// and line count are unchanged (then those lines are the lines verified, each line N with
/// `seq` N), counting into `found` the wanted events among them.
fn unchanged_prefix(
    reader: &mut BufReader<File>,
    prev: &Verified,
    wanted: &std::collections::HashMap<u64, String>,
    found: &mut usize,
) -> std::io::Result<Option<Sha256>> {
    let mut hasher = Sha256::new();
    let mut lines = 0u64;
    let mut hits = 0usize;
    let mut prefix = reader.by_ref().take(prev.len);
    let mut buf = Vec::new();
    // Bounded by `prev.len` bytes: each pass consumes at least one byte.
    loop {
        buf.clear();
        if prefix.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        hasher.update(&buf);
        if buf.last() == Some(&b'\n') {
            lines += 1;
            let at = HASH_PREFIX.len();
            if let Some(w) = wanted.get(&lines) {
                if buf.starts_with(HASH_PREFIX.as_bytes())
                    && buf.get(at..at + 64) == Some(w.as_bytes())
                {
                    hits += 1;
                }
            }
        }
    }
    let digest: [u8; 32] = hasher.clone().finalize().into();
    if prefix.limit() == 0 && digest == prev.digest && lines == prev.state.lineno {
        *found += hits;
        Ok(Some(hasher))
    } else {
        Ok(None)
    }
}

/// A file's device and inode (none where the platform has no such identity: no reuse there).
#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
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

    /// A log file with `n` events, every third of task `t1`.
    fn log_with(path: &Path, n: usize) -> AuditLog {
        let log = AuditLog::open_file(path).unwrap();
        append(&log, 0, n);
        log
    }

    fn append(log: &AuditLog, from: usize, n: usize) {
        for i in from..from + n {
            let task = (i % 3 == 0).then_some("t1");
            log.emit(
                task,
                "tool_exec",
                serde_json::json!({"tool": "file_create", "i": i}),
            );
        }
    }

    /// The (seq, hash) the watch page recorded for `t1`.
    fn wanted_of(log: &AuditLog) -> std::collections::HashMap<u64, String> {
        log.tap()
            .events("t1")
            .unwrap()
            .events
            .iter()
            .map(|e| {
                (
                    e["seq"].as_u64().unwrap(),
                    e["hash"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_file_check_resumes_after_what_it_verified_and_gives_what_verify_file_gives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.ndjson");
        let log = log_with(&path, 60);
        let mut since = None;
        let wanted = wanted_of(&log);
        let first = verify_file_since(&path, &wanted, &mut since);
        assert_eq!(first.result, verify_file(&path));
        assert_eq!((first.found, first.parsed), (20, 60));
        append(&log, 60, 15);
        let wanted = wanted_of(&log);
        let second = verify_file_since(&path, &wanted, &mut since);
        assert_eq!(second.result, verify_file(&path));
        assert_eq!(second.result.as_ref().unwrap().events, 75);
        // Only the 15 new lines were parsed; the task's 25 events were found in both parts.
        assert_eq!((second.found, second.parsed), (25, 15));
        // A hash the page recorded that the file does not hold is not found.
        let mut forged = wanted.clone();
        // (Lines 4 and 70 are t1's: one before the resume point, one after.)
        assert!(forged.insert(4, "0".repeat(64)).is_some());
        assert!(forged.insert(70, "0".repeat(64)).is_some());
        let third = verify_file_since(&path, &forged, &mut since);
        assert_eq!((third.found, third.parsed), (23, 0));
    }

    #[test]
    fn a_byte_changed_before_the_resume_point_is_caught_as_verify_file_catches_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.ndjson");
        let log = log_with(&path, 30);
        let mut since = None;
        let wanted = wanted_of(&log);
        assert!(verify_file_since(&path, &wanted, &mut since).result.is_ok());
        // Line 4's "file_create" becomes "file_delete" (same length, same file, same inode).
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[3] = lines[3].replacen("file_create", "file_delete", 1);
        let mut f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
        drop(f);
        append(&log, 30, 3);
        let after = verify_file_since(&path, &wanted_of(&log), &mut since);
        let expected = verify_file(&path);
        assert_eq!(expected.as_ref().unwrap_err().line, 4, "{expected:?}");
        assert_eq!(after.result, expected);
        assert!(since.is_none(), "nothing is kept after an error");
        // Put back, the next check is a whole one again (nothing was kept to resume from).
        lines[3] = lines[3].replacen("file_delete", "file_create", 1);
        let text = std::fs::read_to_string(&path).unwrap();
        let tail: Vec<&str> = text.lines().skip(30).collect();
        std::fs::write(&path, lines.join("\n") + "\n" + &tail.join("\n") + "\n").unwrap();
        let again = verify_file_since(&path, &wanted_of(&log), &mut since);
        assert_eq!(again.result, verify_file(&path));
        assert_eq!((again.result.unwrap().events, again.parsed), (33, 33));
    }

    #[test]
    fn a_replaced_or_shortened_file_is_checked_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.ndjson");
        let log = log_with(&path, 20);
        let wanted = wanted_of(&log);
        let mut since = None;
        assert!(verify_file_since(&path, &wanted, &mut since).result.is_ok());
        // The same bytes under a new inode: checked whole.
        let copy = dir.path().join("copy");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::rename(&copy, &path).unwrap();
        let replaced = verify_file_since(&path, &wanted, &mut since);
        assert_eq!((replaced.result.is_ok(), replaced.parsed), (true, 20));
        // Cut to its first 12 lines: shorter than what verified, checked whole.
        let text = std::fs::read_to_string(&path).unwrap();
        let head: Vec<&str> = text.lines().take(12).collect();
        std::fs::write(&path, head.join("\n") + "\n").unwrap();
        let cut = verify_file_since(&path, &wanted, &mut since);
        assert_eq!(cut.result, verify_file(&path));
        assert_eq!(
            (cut.result.unwrap().events, cut.parsed, cut.found),
            (12, 12, 4)
        );
        // A last line without its newline is checked but not kept to resume from.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"hash\":\"ab").unwrap();
        drop(f);
        let partial = verify_file_since(&path, &wanted, &mut since);
        assert_eq!(partial.result, verify_file(&path));
        assert!(partial.result.is_err() && since.is_none());
    }
}
