//! forge-state: the durable state store. It knows records (tasks, contexts, events, artifacts,
//! replicas, login profiles), not A2A: callers hand in the JSON they want kept. Depends on no other forge crate.
//!
//! - [`StateStore`] (store.rs): the trait every store implements; the records ([`TaskRecord`],
//!   [`ContextRecord`], [`StoredArtifact`], [`ReplicaRecord`]), [`StoreLocation`], [`StateError`],
//!   [`Retention`], and the helpers [`new_id`], [`now_ms`], [`redact_url`].
//! - [`SqlStore`] (sql.rs): the trait on SQLite or PostgreSQL through sqlx, with the embedded
//!   [`MIGRATIONS`] (schema_v1.sql: the version-1 tables); its login profiles in
//!   sql/profiles.rs ([`ProfileRecord`], [`ProfileSave`] are in store.rs); `sql/forms.rs`: its
//!   [`FormStore`].
//! - [`FormStore`] (store.rs, records in forms.rs): learned form schemas (`sites/{host}/forms/{slug}`) and batch rows
//!   ([`FormRecord`], [`BatchRecord`], [`BatchRow`], [`RowState`]; schema version 5).
//!
//! The state store: tasks (status, the A2A task JSON with its history, the result object),
//! conversations (contexts), task events (for `tasks/resubscribe`), artifact bytes and the
//! replicas of a fleet, behind one trait, [`StateStore`].
//!
//! One implementation, [`SqlStore`], speaks both databases through sqlx's `Any` driver:
//!
//! - **SQLite**, the default, at `.forge/state.db` (WAL mode, a 5 s busy timeout): one replica.
//! - **PostgreSQL** when forge.yaml `state.url` or `FORGE_STATE_URL` is a `postgres://` URL: any
//!   number of replicas share it. The database host is infrastructure, reached directly (not
//!   through the agent's egress policy), and the URL's password never appears in an error or log
//!   ([`redact_url`]).
//!
//! The schema is created and upgraded at open by embedded, versioned migrations
//! ([`MIGRATIONS`]); a database written by a newer forge is refused with the versions named.
//! Cross-replica cancellation is a flag on the task row that the replica running the task polls
//! ([`StateStore::cancel_requested`]); it works the same on both databases.

mod forms;
mod sql;
mod store;

pub use forms::{BatchRecord, BatchRow, FormRecord, RowState};
pub use sql::{SqlStore, MIGRATIONS};
pub use store::{
    is_final_state, new_id, now_ms, redact_url, ContextRecord, FailedTask, FormStore,
    ProfileRecord, ProfileSave, ReplicaRecord, Retention, StateError, StateStore, StoreLocation,
    StoredArtifact, TaskRecord, DEFAULT_KEEP_DAYS, DEFAULT_KEEP_TASKS, DEFAULT_MAX_ARTIFACT_BYTES,
};
