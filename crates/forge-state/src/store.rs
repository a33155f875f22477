//! The records (tasks, contexts, artifacts, replicas), the [`StateStore`] trait every store
//! implements, where a store lives ([`StoreLocation`]), how it fails ([`StateError`]), and the
//! id and clock helpers.

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::Value;

/// Largest artifact kept in the store unless configured otherwise (10 MiB).
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 10 * 1024 * 1024;
/// Tasks kept by default (forge.yaml `state.keep_tasks`).
pub const DEFAULT_KEEP_TASKS: u64 = 1_000;
/// Days a finished task is kept by default (forge.yaml `state.keep_days`).
pub const DEFAULT_KEEP_DAYS: u64 = 7;

/// Where the store lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file (created when missing, with its parent directory).
    Sqlite(PathBuf),
    /// A PostgreSQL URL (`postgres://` or `postgresql://`).
    Postgres(String),
}

impl StoreLocation {
    /// The location for a configured URL, or the default `<agent dir>/.forge/state.db`.
    /// `sqlite:PATH` and `sqlite://PATH` name a SQLite file; `postgres://`/`postgresql://` a server.
    pub fn from_config(url: Option<&str>, agent_dir: &std::path::Path) -> Result<Self, StateError> {
        // Absolute, so messages name the file wherever forge was started from.
        let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(StoreLocation::Sqlite(abs(agent_dir
                .join(".forge")
                .join("state.db"))));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(url.to_string()));
        }
        if let Some(rest) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = PathBuf::from(rest);
            let path = if path.is_absolute() {
                path
            } else {
                agent_dir.join(path)
            };
            return Ok(StoreLocation::Sqlite(abs(path)));
        }
        Err(StateError::BadUrl {
            url: redact_url(url),
        })
    }

    /// How the location is named in messages (the password of a URL replaced by `***`).
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Sqlite(p) => format!("SQLite store {}", p.display()),
            StoreLocation::Postgres(u) => format!("PostgreSQL store {}", redact_url(u)),
        }
    }
}

/// `url` with its password (if any) replaced by `***`; anything that does not parse as a URL is
/// shown only up to its scheme.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                // set_password fails only for URLs that cannot have credentials, which a URL
                // with a password is not.
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        Err(_) => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://…"),
            None => "(not a URL)".to_string(),
        },
    }
}

/// Why the store failed. Each message names the store and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// `state.url` / `FORGE_STATE_URL` is neither SQLite nor PostgreSQL.
    #[error("state store URL {url} is not supported; use postgres://USER:PASSWORD@HOST:PORT/DB for PostgreSQL, sqlite:PATH for a SQLite file, or leave state.url unset for .forge/state.db")]
    BadUrl {
        /// The URL, password redacted.
        url: String,
    },
    /// The store could not be opened (unreachable server, refused login, not a database).
    #[error("cannot open the {store}: {reason}; {fix}")]
    Open {
        /// The store, named by [`StoreLocation::display`].
        store: String,
        /// What the database said.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// The database was written by a newer forge.
    #[error("the {store} has schema version {found}, newer than this forge knows ({known}); run the newer forge, or point state.url at another database")]
    TooNew {
        /// The store.
        store: String,
        /// The version in the database.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// An artifact is larger than the store keeps.
    #[error("artifact {name} of task {task_id} is {size} bytes, over the store's limit of {limit} bytes (state.max_artifact_bytes)")]
    ArtifactTooLarge {
        /// The task.
        task_id: String,
        /// The file name.
        name: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A stored value is not what forge wrote (hand-edited or corrupt row).
    #[error("the {store} holds a corrupt {what}: {reason}")]
    Corrupt {
        /// The store.
        store: String,
        /// Which record.
        what: String,
        /// Why it does not read.
        reason: String,
    },
    /// Another live process holds the only lease of a SQLite store (one owner per SQLite file).
    #[error("the {store} is in use by another forge: {owner}, last seen {age_s} s ago; stop that process first (a lease it stops renewing expires after {expiry_s} s), or give this one its own store (state.url or FORGE_STATE_URL = sqlite:OTHER.db), or use PostgreSQL (state.url: postgres://...) to run several replicas on one store")]
    LeaseHeld {
        /// The store.
        store: String,
        /// The owner, named by [`ReplicaRecord::describe`].
        owner: String,
        /// Seconds since the owner last renewed its lease.
        age_s: i64,
        /// Seconds after which a lease nobody renews has expired.
        expiry_s: i64,
    },
    /// SQLite's write lock stayed taken by another process for longer than the busy timeout.
    #[error("the {store} is locked by another process (forge waited {waited_s} s): {reason}; another forge, a sqlite3 shell or a backup is writing to it. Find the holder with `fuser -v {file}` (or `lsof {file}`) and stop it, then retry; to run several forge processes on one store use PostgreSQL (state.url: postgres://...)")]
    Locked {
        /// The store.
        store: String,
        /// The file.
        file: String,
        /// How long forge waited for the lock.
        waited_s: u64,
        /// What SQLite said.
        reason: String,
    },
    /// A query failed.
    #[error("{store}: {reason}")]
    Query {
        /// The store.
        store: String,
        /// What the database said (never the URL).
        reason: String,
    },
}

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    /// The task id.
    pub id: String,
    /// Its conversation.
    pub context_id: String,
    /// A2A state: `submitted`, `working`, `completed`, `canceled`, `failed`, ...
    pub state: String,
    /// The replica running it (its id), while it runs.
    pub replica: Option<String>,
    /// The A2A task JSON (status, history, artifacts).
    pub task: Value,
    /// The structured result object, once the task ended.
    pub result: Option<Value>,
    /// Milliseconds since the Unix epoch when it was created.
    pub created_ms: i64,
    /// ... and last changed.
    pub updated_ms: i64,
}

impl TaskRecord {
    /// Whether the state is final (`completed`, `canceled`, `failed`, `rejected`).
    pub fn is_final(&self) -> bool {
        is_final_state(&self.state)
    }
}

/// Whether an A2A task state is final.
pub fn is_final_state(state: &str) -> bool {
    matches!(state, "completed" | "canceled" | "failed" | "rejected")
}

/// A conversation as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextRecord {
    /// The A2A `contextId`.
    pub id: String,
    /// The conversation so far (the loop's messages, as JSON).
    pub messages: Value,
    /// The replica holding the context's live browser session, if one is open.
    pub browser_replica: Option<String>,
    /// The context's scope (allowed hosts and budgets of its first task), if it has one.
    pub scope: Option<Value>,
    /// Milliseconds since the Unix epoch when it last changed.
    pub updated_ms: i64,
}

/// An artifact's bytes and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredArtifact {
    /// The file name (no directories).
    pub name: String,
    /// Its MIME type.
    pub mime_type: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A login profile as stored: encrypted by the caller before it gets here (the store never
/// sees a cookie), with what `forge profile list` shows in the clear.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileRecord {
    /// The profile's name (forge.yaml `browser.profiles`).
    pub name: String,
    /// The origins it keeps (normalised `scheme://host[:port]`).
    pub origins: Vec<String>,
    /// The sealed cookies and local storage (AEAD ciphertext with its tag).
    pub ciphertext: Vec<u8>,
    /// The AEAD nonce (random per save).
    pub nonce: Vec<u8>,
    /// The fingerprint of the key that sealed it (never the key).
    pub key_id: String,
    /// The plaintext's size in bytes.
    pub size_bytes: i64,
    /// First saved, ms since the epoch.
    pub created_ms: i64,
    /// Last saved.
    pub updated_ms: i64,
    /// Last used by a task (loaded or saved).
    pub last_used_ms: Option<i64>,
    /// Incremented by every save (1 after the first).
    pub version: i64,
}

/// What [`StateStore::save_profile`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileSave {
    /// Written; the profile is now at `version`.
    Saved {
        /// The new version.
        version: i64,
    },
    /// Not written: the profile was saved by someone else since it was read (its version is
    /// now `current`; `None`: it was deleted).
    Stale {
        /// The stored version.
        current: Option<i64>,
    },
}

/// A replica of a fleet, as it last reported itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaRecord {
    /// Its id (random per process start).
    pub id: String,
    /// The base URL other replicas forward to (`http://10.0.0.7:8080/`).
    pub address: String,
    /// When it last reported, ms since the epoch.
    pub heartbeat_ms: i64,
    /// Its process id, when it said (leases taken by [`StateStore::acquire_lease`]).
    pub pid: Option<i64>,
    /// The host it runs on (its hostname), when it said.
    pub host: Option<String>,
}

impl ReplicaRecord {
    /// The replica as named in messages: `replica ID at ADDRESS (pid P on HOST)`.
    pub fn describe(&self) -> String {
        let mut s = format!("replica {}", self.id);
        if !self.address.is_empty() {
            s.push_str(&format!(" at {}", self.address));
        }
        match (self.pid, self.host.as_deref()) {
            (Some(p), Some(h)) if !h.is_empty() => s.push_str(&format!(" (pid {p} on {h})")),
            (Some(p), _) => s.push_str(&format!(" (pid {p})")),
            (None, Some(h)) if !h.is_empty() => s.push_str(&format!(" (on {h})")),
            _ => {}
        }
        s
    }
}

/// Retention: how much finished work is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// At most this many tasks (the newest; running tasks are never removed).
    pub keep_tasks: u64,
    /// Finished tasks older than this many days are removed.
    pub keep_days: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            keep_tasks: DEFAULT_KEEP_TASKS,
            keep_days: DEFAULT_KEEP_DAYS,
        }
    }
}

/// How a task marked `failed` by [`StateStore::fail_unfinished`] / [`StateStore::fail_orphaned`]
/// is rewritten: given the stored record, its new task JSON. The caller (forge-runtime) knows the
/// task's wire shape (status, message); the store only writes the value back with state `failed`.
pub type FailedTask<'a> = &'a (dyn Fn(&TaskRecord) -> Value + Send + Sync);

/// Tasks, contexts, events, artifacts and replicas. Every method is one short transaction;
/// implementations are shared by all tasks of a process (and, for PostgreSQL, by all replicas).
#[async_trait]
pub trait StateStore: Send + Sync {
    /// `sqlite` or `postgres`.
    fn kind(&self) -> &'static str;
    /// The store as named in messages (password redacted).
    fn describe(&self) -> String;
    /// Insert or replace a task.
    async fn save_task(&self, task: &TaskRecord) -> Result<(), StateError>;
    /// A task by id.
    async fn task(&self, id: &str) -> Result<Option<TaskRecord>, StateError>;
    /// Append an event to a task's stream; returns its sequence number (1, 2, ...).
    async fn append_event(&self, task_id: &str, event: &Value) -> Result<i64, StateError>;
    /// A task's events with a sequence number above `after`, in order, at most `limit`.
    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, Value)>, StateError>;
    /// Insert or replace a conversation.
    async fn save_context(&self, context: &ContextRecord) -> Result<(), StateError>;
    /// A conversation by id.
    async fn context(&self, id: &str) -> Result<Option<ContextRecord>, StateError>;
    /// Keep an artifact's bytes (refused over the store's per-artifact limit).
    async fn save_artifact(
        &self,
        task_id: &str,
        artifact: &StoredArtifact,
    ) -> Result<(), StateError>;
    /// An artifact of a task, by file name.
    async fn artifact(
        &self,
        task_id: &str,
        name: &str,
    ) -> Result<Option<StoredArtifact>, StateError>;
    /// Ask the replica running `task_id` to cancel it; false when the task is unknown or final.
    async fn request_cancel(&self, task_id: &str) -> Result<bool, StateError>;
    /// Whether a cancel was requested for `task_id`.
    async fn cancel_requested(&self, task_id: &str) -> Result<bool, StateError>;
    /// Mark every unfinished task of `replica` (every unfinished task when `None`) `failed`, its
    /// task JSON replaced by what `failed` makes of the stored record; returns their ids.
    async fn fail_unfinished(
        &self,
        replica: Option<&str>,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError>;
    /// Mark `failed` (task JSON rewritten by `failed`) every unfinished task whose replica has not
    /// reported since `alive_since_ms` (or has no replica); returns their ids.
    async fn fail_orphaned(
        &self,
        alive_since_ms: i64,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError>;
    /// Remove finished tasks (with their events, artifacts and message claims) beyond the
    /// retention; also claims older than `keep_days` whose task never reached the store, and
    /// leases not renewed for `keep_days`. Returns how many tasks were removed.
    async fn prune(&self, retention: Retention) -> Result<u64, StateError>;
    /// Record that `replica` is alive at `address` (renews its lease; pid and host are kept).
    async fn heartbeat(&self, replica: &str, address: &str) -> Result<(), StateError>;
    /// Take a lease for `me` (id, address, pid, host; its heartbeat is now). With
    /// `sole_since = Some(cut)` the lease is exclusive: when another replica renewed its lease at
    /// or after `cut` (ms since the epoch), nothing is written and the answer is
    /// [`StateError::LeaseHeld`] naming it. The check and the write are one write transaction, so
    /// of two processes starting at once only one gets the lease.
    async fn acquire_lease(
        &self,
        me: &ReplicaRecord,
        sole_since: Option<i64>,
        expiry_ms: i64,
    ) -> Result<(), StateError>;
    /// Record that message `message_id` of conversation `context_id` is accepted as task
    /// `task_id` by `replica`, unless it was accepted before: `None` when this call claimed it
    /// (run it), `Some(task id)` of the earlier acceptance otherwise (do not run it again). One
    /// atomic insert, so of two replicas claiming at once exactly one gets `None`. The row goes
    /// when its task is pruned.
    async fn claim_message(
        &self,
        context_id: &str,
        message_id: &str,
        task_id: &str,
        replica: &str,
    ) -> Result<Option<String>, StateError>;
    /// Remove the claim of message `message_id` of `context_id` when it names `task_id` (that
    /// task never started, so the message may be sent again).
    async fn release_message(
        &self,
        context_id: &str,
        message_id: &str,
        task_id: &str,
    ) -> Result<(), StateError>;
    /// Every replica lease, newest heartbeat first.
    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StateError>;
    /// Remove a replica's lease (it stopped, or is known dead).
    async fn remove_replica(&self, id: &str) -> Result<(), StateError>;
    /// Mark `failed` (task JSON rewritten by `failed`) every unfinished task whose replica holds
    /// no lease renewed at or after `alive_since_ms` (or that has no replica); returns their ids.
    /// Used at start: unlike [`StateStore::fail_orphaned`] it does not spare recently updated
    /// tasks, because a replica takes its lease before it accepts any task.
    async fn fail_unowned(
        &self,
        alive_since_ms: i64,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError>;
    /// A replica by id.
    async fn replica(&self, id: &str) -> Result<Option<ReplicaRecord>, StateError>;
    /// A login profile by name.
    async fn profile(&self, name: &str) -> Result<Option<ProfileRecord>, StateError>;
    /// Every login profile, by name.
    async fn profiles(&self) -> Result<Vec<ProfileRecord>, StateError>;
    /// Save `profile` (its times and version are the store's) when its stored version is still
    /// `read_version` (`None`: when there is none yet); otherwise nothing is written and the
    /// answer is [`ProfileSave::Stale`]. The check and the write are one write transaction.
    async fn save_profile(
        &self,
        profile: &ProfileRecord,
        read_version: Option<i64>,
    ) -> Result<ProfileSave, StateError>;
    /// Record that a task used profile `name` now.
    async fn touch_profile(&self, name: &str) -> Result<(), StateError>;
    /// Remove profile `name`; whether there was one.
    async fn delete_profile(&self, name: &str) -> Result<bool, StateError>;
    /// The form schemas and batch rows of this store (issue 25), when it keeps them.
    fn forms(&self) -> Option<&dyn FormStore> {
        None
    }
}

/// A fresh random id in UUID form (tasks, messages, artifacts, MCP sessions).
pub fn new_id() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Form schemas and batch rows (issue 25; the records and states are in forms.rs).
#[async_trait]
pub trait FormStore: Send + Sync {
    /// Insert or replace the schema of `host`/`slug`.
    async fn save_form(&self, form: &crate::forms::FormRecord) -> Result<(), StateError>;
    /// The schema of `host`/`slug`.
    async fn form(
        &self,
        host: &str,
        slug: &str,
    ) -> Result<Option<crate::forms::FormRecord>, StateError>;
    /// Every stored schema (by host, then slug).
    async fn forms(&self) -> Result<Vec<crate::forms::FormRecord>, StateError>;
    /// Start batch `batch` with `rows` (all `pending`), or, when it exists, return it as it is
    /// (a resume): rows left `submitting` become `uncertain` first. `Ok((record, rows, resumed))`.
    async fn open_batch(
        &self,
        batch: &crate::forms::BatchRecord,
        rows: &[Value],
    ) -> Result<(crate::forms::BatchRecord, Vec<crate::forms::BatchRow>, bool), StateError>;
    /// Claim row `index` for submitting: `true` when it was `pending` and is now `submitting`
    /// (this caller may submit it), `false` when someone else has it or it is finished.
    async fn claim_row(&self, batch: &str, index: i64, replica: &str) -> Result<bool, StateError>;
    /// Put a `submitting` row back to `pending` (nothing was sent: the form did not open, the
    /// batch stopped before the submit).
    async fn unclaim_row(&self, batch: &str, index: i64) -> Result<(), StateError>;
    /// Record how row `index` ended.
    async fn finish_row(
        &self,
        batch: &str,
        index: i64,
        state: crate::forms::RowState,
        message: Option<&str>,
    ) -> Result<(), StateError>;
    /// The rows of `batch` in order.
    async fn batch_rows(&self, batch: &str) -> Result<Vec<crate::forms::BatchRow>, StateError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password_only() {
        assert_eq!(
            redact_url("postgres://forge:s3cret@db.internal:5432/forge"),
            "postgres://forge:***@db.internal:5432/forge"
        );
        assert_eq!(
            redact_url("postgres://db.internal/forge"),
            "postgres://db.internal/forge"
        );
        assert!(!redact_url("postgres://u:p@@@ bad").contains("p@@"));
    }

    #[test]
    fn locations_from_config() {
        let dir = std::path::Path::new("/agents/a");
        assert_eq!(
            StoreLocation::from_config(None, dir).ok(),
            Some(StoreLocation::Sqlite(PathBuf::from(
                "/agents/a/.forge/state.db"
            )))
        );
        assert_eq!(
            StoreLocation::from_config(Some("sqlite:state/x.db"), dir).ok(),
            Some(StoreLocation::Sqlite(PathBuf::from("/agents/a/state/x.db")))
        );
        assert!(matches!(
            StoreLocation::from_config(Some("postgresql://h/db"), dir),
            Ok(StoreLocation::Postgres(_))
        ));
        let err = StoreLocation::from_config(Some("mysql://u:pw@h/db"), dir)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("mysql://u:***@h/db"), "{err}");
        assert!(!err.contains("pw"), "{err}");
    }
}
