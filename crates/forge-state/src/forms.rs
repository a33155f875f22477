//! Form schemas and batch rows (issue 25): the records of [`crate::FormStore`] (store.rs) ([`FormRecord`],
//! [`BatchRow`], [`RowState`]) and the schema version that holds them ([`FORMS_V5`]).
//!
//! A learned form is kept under `sites/{host}/forms/{slug}` (the key is `(host, slug)`); any
//! replica on the same store can run a batch on it. A batch's rows are durable: each row's state
//! moves `pending` -> `submitting` (claimed, before its submit is sent) -> `done` | `failed`, and
//! a row left `submitting` by a process that died is turned `uncertain` when the batch is resumed
//! (its submission may or may not have reached the site, so it is reported, never sent again).
//! `FormStore::claim_row` is the one compare-and-set that makes "never submitted twice" hold
//! across replicas.

use serde_json::Value;

/// Version 4: form schemas, batches and their rows.
pub(crate) const FORMS_V5: &str = "CREATE TABLE forge_form_schemas (host TEXT NOT NULL, slug TEXT NOT NULL, schema TEXT NOT NULL, fingerprint TEXT NOT NULL, updated_ms BIGINT NOT NULL, PRIMARY KEY (host, slug));\n\
CREATE TABLE forge_batches (id TEXT PRIMARY KEY, host TEXT NOT NULL, slug TEXT NOT NULL, fingerprint TEXT NOT NULL, total BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL);\n\
CREATE TABLE forge_batch_rows (batch_id TEXT NOT NULL, row_index BIGINT NOT NULL, state TEXT NOT NULL, replica TEXT, message TEXT, data TEXT NOT NULL, updated_ms BIGINT NOT NULL, PRIMARY KEY (batch_id, row_index));\n";

/// A learned form as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct FormRecord {
    /// The site (host, with its port when it has one).
    pub host: String,
    /// The form's name on that site.
    pub slug: String,
    /// The schema JSON (forge-browser's `FormSchema`).
    pub schema: Value,
    /// Its structural fingerprint.
    pub fingerprint: String,
    /// When it was last learned (ms since the epoch).
    pub updated_ms: i64,
}

impl FormRecord {
    /// Its key, `sites/{host}/forms/{slug}`.
    pub fn key(&self) -> String {
        format!("sites/{}/forms/{}", self.host, self.slug)
    }
}

/// Where a batch row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowState {
    /// Not started.
    Pending,
    /// Claimed: its submit may have been sent.
    Submitting,
    /// Submitted and judged done.
    Done,
    /// Judged failed (validation messages, a refusal); nothing more is sent for it.
    Failed,
    /// Left `submitting` by a process that died: it may or may not have been submitted.
    Uncertain,
}

impl RowState {
    /// Its name in the store and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Pending => "pending",
            RowState::Submitting => "submitting",
            RowState::Done => "done",
            RowState::Failed => "failed",
            RowState::Uncertain => "uncertain",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Option<RowState> {
        Some(match s {
            "pending" => RowState::Pending,
            "submitting" => RowState::Submitting,
            "done" => RowState::Done,
            "failed" => RowState::Failed,
            "uncertain" => RowState::Uncertain,
            _ => return None,
        })
    }
}

/// One row of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRow {
    /// 0-based position in the batch.
    pub index: i64,
    /// Where it is.
    pub state: RowState,
    /// The page's message (validation errors) or forge's (a refusal), if any.
    pub message: Option<String>,
    /// The row's values.
    pub data: Value,
}

/// A batch's header.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRecord {
    /// The batch id (the caller's `batchId`, or a new id).
    pub id: String,
    /// The form's site.
    pub host: String,
    /// The form's slug.
    pub slug: String,
    /// The schema fingerprint the batch runs on.
    pub fingerprint: String,
    /// Number of rows.
    pub total: i64,
}
