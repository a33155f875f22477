//! [`SqlStore`]: the [`StateStore`] on SQLite or PostgreSQL through sqlx's `Any` driver, so both
//! run the same queries (placeholders `$1`, `$2`, ... in order, `ON CONFLICT ... DO UPDATE`,
//! integers for flags, text for JSON). Only the schema text differs (`BLOB` vs `BYTEA`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyConnection, AnyPool, Connection, Executor, Row};

mod forms;
mod profiles;

use crate::store::{
    now_ms, ContextRecord, FailedTask, ProfileRecord, ProfileSave, ReplicaRecord, Retention,
    StateError, StateStore, StoreLocation, StoredArtifact, TaskRecord, DEFAULT_MAX_ARTIFACT_BYTES,
};

/// One schema migration: version, name, SQLite text, PostgreSQL text. Applied in order at open,
/// each in its own transaction, recorded in `forge_schema`. Never edit a released entry: add one.
pub const MIGRATIONS: &[(i64, &str, &str, &str)] = &[
    (
        1,
        "tasks, events, contexts, artifacts, replicas",
        concat!(
            include_str!("schema_v1.sql"),
            "CREATE TABLE forge_artifacts (task_id TEXT NOT NULL, name TEXT NOT NULL, mime_type TEXT NOT NULL, size_bytes BIGINT NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY (task_id, name));\n"
        ),
        concat!(
            include_str!("schema_v1.sql"),
            "CREATE TABLE forge_artifacts (task_id TEXT NOT NULL, name TEXT NOT NULL, mime_type TEXT NOT NULL, size_bytes BIGINT NOT NULL, bytes BYTEA NOT NULL, PRIMARY KEY (task_id, name));\n"
        ),
    ),
    (2, "replica leases: pid and host", LEASES_V2, LEASES_V2),
    (3, "accepted messages", MESSAGES_V3, MESSAGES_V3),
    (4, "login profiles", PROFILES_V4_SQLITE, PROFILES_V4_PG),
    (
        5,
        "form schemas, batches and batch rows",
        crate::forms::FORMS_V5,
        crate::forms::FORMS_V5,
    ),
];

/// Version 4: login profiles (sql/profiles.rs), encrypted before they reach the store: the
/// ciphertext, its nonce, the key's fingerprint, the plaintext size, times and a version that
/// every save increments (saves name the version they read).
const PROFILES_V4_SQLITE: &str = "CREATE TABLE forge_profiles (name TEXT PRIMARY KEY, origins TEXT NOT NULL, ciphertext BLOB NOT NULL, nonce BLOB NOT NULL, key_id TEXT NOT NULL, size_bytes BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, last_used_ms BIGINT, version BIGINT NOT NULL);\n";
const PROFILES_V4_PG: &str = "CREATE TABLE forge_profiles (name TEXT PRIMARY KEY, origins TEXT NOT NULL, ciphertext BYTEA NOT NULL, nonce BYTEA NOT NULL, key_id TEXT NOT NULL, size_bytes BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, last_used_ms BIGINT, version BIGINT NOT NULL);\n";

/// Version 3: one row per accepted A2A message (its conversation and message id), written by the
/// replica that accepts it before it runs anything, so a message is never run twice.
const MESSAGES_V3: &str = "CREATE TABLE forge_messages (context_id TEXT NOT NULL, message_id TEXT NOT NULL, task_id TEXT NOT NULL, replica TEXT, created_ms BIGINT NOT NULL, PRIMARY KEY (context_id, message_id));\nCREATE INDEX forge_messages_by_task ON forge_messages (task_id);\n";

/// Version 2: a replica row is a lease that also names its process (pid, host), so a second
/// process on a SQLite store can name the owner, and a restart on the same host can tell that
/// the owner's process is gone.
const LEASES_V2: &str = "ALTER TABLE forge_replicas ADD COLUMN pid BIGINT;\nALTER TABLE forge_replicas ADD COLUMN host TEXT;\n";

/// How long a SQLite connection waits for another process's write lock (`PRAGMA busy_timeout`).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The newest schema version this build knows.
fn known_version() -> i64 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// Serialises migrations of replicas starting at once (a PostgreSQL advisory lock key).
const MIGRATION_LOCK: i64 = 0x666f_7267_6501;

/// The state store on SQLite or PostgreSQL.
pub struct SqlStore {
    pool: AnyPool,
    postgres: bool,
    name: String,
    /// The SQLite file (for the "locked" error's fix), `None` for PostgreSQL.
    file: Option<String>,
    max_artifact_bytes: u64,
}

impl SqlStore {
    /// Open (creating when missing) the store at `location` and bring its schema up to date.
    pub async fn open(location: &StoreLocation) -> Result<SqlStore, StateError> {
        sqlx::any::install_default_drivers();
        let name = location.display();
        let file = match location {
            StoreLocation::Sqlite(p) => Some(p.display().to_string()),
            StoreLocation::Postgres(_) => None,
        };
        let (url, postgres, secret) = match location {
            StoreLocation::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| StateError::Open {
                        store: name.clone(),
                        reason: format!("cannot create {}: {e}", dir.display()),
                        fix: "make the directory writable, or set state.url".into(),
                    })?;
                }
                let abs = std::path::absolute(path).map_err(|e| StateError::Open {
                    store: name.clone(),
                    reason: e.to_string(),
                    fix: "set state.url to an absolute sqlite:PATH".into(),
                })?;
                let file = url::Url::from_file_path(&abs).map_err(|()| StateError::Open {
                    store: name.clone(),
                    reason: "the path cannot be written as a URL".into(),
                    fix: "set state.url to a plain absolute sqlite:PATH".into(),
                })?;
                // file:///a%20b/state.db -> sqlite:///a%20b/state.db (sqlx decodes the path).
                let url = format!("sqlite://{}?mode=rwc", file.path());
                (url, false, None)
            }
            StoreLocation::Postgres(url) => {
                let secret = url::Url::parse(url)
                    .ok()
                    .and_then(|u| u.password().map(str::to_string))
                    .filter(|p| !p.is_empty());
                (url.clone(), true, secret)
            }
        };
        let scrub = |reason: String| match &secret {
            Some(p) => reason.replace(p.as_str(), "***"),
            None => reason,
        };
        // One connection first, so that a refused login, an unreachable server or a file that is
        // not a database is reported as itself (the pool would only say it timed out).
        let mut probe = AnyConnection::connect(&url)
            .await
            .map_err(|e| open_error(&name, postgres, scrub(e.to_string())))?;
        // The busy timeout first: switching to WAL takes the write lock, which another process
        // may hold for a moment.
        let check = if postgres {
            "SELECT 1".to_string()
        } else {
            format!(
                "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL",
                BUSY_TIMEOUT.as_millis()
            )
        };
        probe.execute(check.as_str()).await.map_err(|e| {
            locked_error(&name, file.as_deref(), &e.to_string())
                .unwrap_or_else(|| open_error(&name, postgres, scrub(e.to_string())))
        })?;
        let _ = probe.close().await;
        let pool = AnyPoolOptions::new()
            .max_connections(if postgres { 8 } else { 4 })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    // Every pooled connection waits BUSY_TIMEOUT for another process's lock.
                    if !postgres {
                        let pragmas = format!(
                            "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;",
                            BUSY_TIMEOUT.as_millis()
                        );
                        conn.execute(pragmas.as_str()).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await
            .map_err(|e| {
                locked_error(&name, file.as_deref(), &e.to_string())
                    .unwrap_or_else(|| open_error(&name, postgres, scrub(e.to_string())))
            })?;
        let store = SqlStore {
            pool,
            postgres,
            name,
            file,
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
        };
        store.migrate().await.map_err(|e| match e {
            StateError::Query { store, reason } => open_error(&store, postgres, scrub(reason)),
            other => other,
        })?;
        Ok(store)
    }

    /// Refuse artifacts larger than `limit` bytes (default 10 MiB).
    pub fn with_max_artifact_bytes(mut self, limit: u64) -> Self {
        self.max_artifact_bytes = limit;
        self
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i64, StateError> {
        let row = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM forge_schema")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        row.try_get::<i64, _>("v").map_err(|e| self.query_error(e))
    }

    /// Close the pool (waits for connections in use to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A transaction that writes. On SQLite it is `BEGIN IMMEDIATE`: it takes the write lock at
    /// once (waiting up to the busy timeout), so a read followed by a write never fails at the
    /// write with "database is locked" because another process wrote in between (SQLite does
    /// not wait in that case).
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StateError> {
        if self.postgres {
            self.pool.begin().await
        } else {
            self.pool.begin_with("BEGIN IMMEDIATE").await
        }
        .map_err(|e| self.query_error(e))
    }

    async fn migrate(&self) -> Result<(), StateError> {
        let mut tx = self.begin_write().await?;
        if self.postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(MIGRATION_LOCK)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
        }
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS forge_schema (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        let row = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM forge_schema")
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let current: i64 = row.try_get("v").map_err(|e| self.query_error(e))?;
        if current > known_version() {
            return Err(StateError::TooNew {
                store: self.name.clone(),
                found: current,
                known: known_version(),
            });
        }
        for (version, name, sqlite, pg) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            let text = if self.postgres { pg } else { sqlite };
            sqlx::raw_sql(text)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
            sqlx::query("INSERT INTO forge_schema (version, name, applied_ms) VALUES ($1, $2, $3)")
                .bind(*version)
                .bind(*name)
                .bind(now_ms())
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
        }
        tx.commit().await.map_err(|e| self.query_error(e))
    }

    fn query_error(&self, e: sqlx::Error) -> StateError {
        let reason = e.to_string();
        if !self.postgres {
            if let Some(locked) = locked_error(&self.name, self.file.as_deref(), &reason) {
                return locked;
            }
        }
        StateError::Query {
            store: self.name.clone(),
            reason,
        }
    }

    fn corrupt(&self, what: String, reason: impl std::fmt::Display) -> StateError {
        StateError::Corrupt {
            store: self.name.clone(),
            what,
            reason: reason.to_string(),
        }
    }

    fn json_col(&self, row: &AnyRow, col: &str, what: &str) -> Result<Value, StateError> {
        let text: String = row.try_get(col).map_err(|e| self.query_error(e))?;
        serde_json::from_str(&text).map_err(|e| self.corrupt(format!("{what} ({col})"), e))
    }

    fn opt_json_col(
        &self,
        row: &AnyRow,
        col: &str,
        what: &str,
    ) -> Result<Option<Value>, StateError> {
        let text: Option<String> = row.try_get(col).map_err(|e| self.query_error(e))?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| self.corrupt(format!("{what} ({col})"), e))
        })
        .transpose()
    }

    /// Mark each task of `rows` `failed`, its task JSON rewritten by `failed`; returns the ids.
    async fn mark_failed(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        rows: &[AnyRow],
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError> {
        let mut ids = Vec::new();
        for r in rows {
            let mut t = self.task_from_row(r)?;
            t.task = failed(&t);
            sqlx::query(
                "UPDATE forge_tasks SET state = 'failed', task = $1, replica = NULL, updated_ms = $2 WHERE id = $3",
            )
            .bind(t.task.to_string())
            .bind(now_ms())
            .bind(&t.id)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.query_error(e))?;
            ids.push(t.id);
        }
        Ok(ids)
    }

    fn replica_from_row(&self, r: &AnyRow) -> Result<ReplicaRecord, StateError> {
        Ok(ReplicaRecord {
            id: r.try_get("id").map_err(|e| self.query_error(e))?,
            address: r.try_get("address").map_err(|e| self.query_error(e))?,
            heartbeat_ms: r.try_get("heartbeat_ms").map_err(|e| self.query_error(e))?,
            pid: r.try_get("pid").map_err(|e| self.query_error(e))?,
            host: r.try_get("host").map_err(|e| self.query_error(e))?,
        })
    }

    fn task_from_row(&self, row: &AnyRow) -> Result<TaskRecord, StateError> {
        let id: String = row.try_get("id").map_err(|e| self.query_error(e))?;
        let what = format!("task {id}");
        Ok(TaskRecord {
            context_id: row.try_get("context_id").map_err(|e| self.query_error(e))?,
            state: row.try_get("state").map_err(|e| self.query_error(e))?,
            replica: row.try_get("replica").map_err(|e| self.query_error(e))?,
            task: self.json_col(row, "task", &what)?,
            result: self.opt_json_col(row, "result", &what)?,
            created_ms: row.try_get("created_ms").map_err(|e| self.query_error(e))?,
            updated_ms: row.try_get("updated_ms").map_err(|e| self.query_error(e))?,
            id,
        })
    }
}

/// SQLite's "database is locked" / "database is busy" as [`StateError::Locked`] (with the fix);
/// `None` for any other error.
fn locked_error(store: &str, file: Option<&str>, reason: &str) -> Option<StateError> {
    let file = file?;
    let lower = reason.to_ascii_lowercase();
    (lower.contains("database is locked")
        || lower.contains("database is busy")
        || lower.contains("database table is locked"))
    .then(|| StateError::Locked {
        store: store.to_string(),
        file: file.to_string(),
        waited_s: BUSY_TIMEOUT.as_secs(),
        reason: reason.to_string(),
    })
}

fn open_error(store: &str, postgres: bool, reason: String) -> StateError {
    let lower = reason.to_ascii_lowercase();
    let fix = if postgres {
        if lower.contains("password") || lower.contains("authentication") {
            "check the user and password in state.url / FORGE_STATE_URL".to_string()
        } else if lower.contains("does not exist") {
            "create the database (createdb) or fix its name in state.url / FORGE_STATE_URL"
                .to_string()
        } else {
            "check that the PostgreSQL server named in state.url / FORGE_STATE_URL is running and reachable from here".to_string()
        }
    } else if lower.contains("not a database")
        || lower.contains("malformed")
        || lower.contains("corrupt")
    {
        "the file is not a SQLite database or is damaged: move it aside (forge then starts with an empty store) or restore it from a backup".to_string()
    } else {
        "check that the file and its directory are writable by forge, or set state.url".to_string()
    };
    StateError::Open {
        store: store.to_string(),
        reason,
        fix,
    }
}

fn final_states_sql() -> &'static str {
    "('completed', 'canceled', 'failed', 'rejected')"
}

#[async_trait]
impl StateStore for SqlStore {
    fn kind(&self) -> &'static str {
        if self.postgres {
            "postgres"
        } else {
            "sqlite"
        }
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    async fn save_task(&self, task: &TaskRecord) -> Result<(), StateError> {
        sqlx::query(
            "INSERT INTO forge_tasks (id, context_id, state, replica, task, result, cancel_requested, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8) \
             ON CONFLICT (id) DO UPDATE SET context_id = excluded.context_id, state = excluded.state, \
             replica = excluded.replica, task = excluded.task, result = excluded.result, updated_ms = excluded.updated_ms",
        )
        .bind(&task.id)
        .bind(&task.context_id)
        .bind(&task.state)
        .bind(task.replica.as_deref())
        .bind(task.task.to_string())
        .bind(task.result.as_ref().map(Value::to_string))
        .bind(task.created_ms)
        .bind(task.updated_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn task(&self, id: &str) -> Result<Option<TaskRecord>, StateError> {
        let row = sqlx::query(
            "SELECT id, context_id, state, replica, task, result, created_ms, updated_ms FROM forge_tasks WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        row.map(|r| self.task_from_row(&r)).transpose()
    }

    async fn append_event(&self, task_id: &str, event: &Value) -> Result<i64, StateError> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "SELECT COALESCE(MAX(seq), 0) AS s FROM forge_task_events WHERE task_id = $1",
        )
        .bind(task_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        let seq: i64 = row
            .try_get::<i64, _>("s")
            .map_err(|e| self.query_error(e))?
            + 1;
        sqlx::query(
            "INSERT INTO forge_task_events (task_id, seq, event, created_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(task_id)
        .bind(seq)
        .bind(event.to_string())
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(seq)
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, Value)>, StateError> {
        let rows = sqlx::query(
            "SELECT seq, event FROM forge_task_events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(task_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get("seq").map_err(|e| self.query_error(e))?;
                let ev = self.json_col(r, "event", &format!("event {seq} of task {task_id}"))?;
                Ok((seq, ev))
            })
            .collect()
    }

    async fn save_context(&self, context: &ContextRecord) -> Result<(), StateError> {
        sqlx::query(
            "INSERT INTO forge_contexts (id, messages, browser_replica, scope, updated_ms) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (id) DO UPDATE SET messages = excluded.messages, browser_replica = excluded.browser_replica, \
             scope = excluded.scope, updated_ms = excluded.updated_ms",
        )
        .bind(&context.id)
        .bind(context.messages.to_string())
        .bind(context.browser_replica.as_deref())
        .bind(context.scope.as_ref().map(Value::to_string))
        .bind(context.updated_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn context(&self, id: &str) -> Result<Option<ContextRecord>, StateError> {
        let row = sqlx::query(
            "SELECT id, messages, browser_replica, scope, updated_ms FROM forge_contexts WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        let Some(r) = row else { return Ok(None) };
        let what = format!("context {id}");
        Ok(Some(ContextRecord {
            id: id.to_string(),
            messages: self.json_col(&r, "messages", &what)?,
            browser_replica: r
                .try_get("browser_replica")
                .map_err(|e| self.query_error(e))?,
            scope: self.opt_json_col(&r, "scope", &what)?,
            updated_ms: r.try_get("updated_ms").map_err(|e| self.query_error(e))?,
        }))
    }

    async fn save_artifact(
        &self,
        task_id: &str,
        artifact: &StoredArtifact,
    ) -> Result<(), StateError> {
        let size = artifact.bytes.len() as u64;
        if size > self.max_artifact_bytes {
            return Err(StateError::ArtifactTooLarge {
                task_id: task_id.to_string(),
                name: artifact.name.clone(),
                size,
                limit: self.max_artifact_bytes,
            });
        }
        sqlx::query(
            "INSERT INTO forge_artifacts (task_id, name, mime_type, size_bytes, bytes) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (task_id, name) DO UPDATE SET mime_type = excluded.mime_type, size_bytes = excluded.size_bytes, bytes = excluded.bytes",
        )
        .bind(task_id)
        .bind(&artifact.name)
        .bind(&artifact.mime_type)
        .bind(size as i64)
        .bind(artifact.bytes.clone())
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn artifact(
        &self,
        task_id: &str,
        name: &str,
    ) -> Result<Option<StoredArtifact>, StateError> {
        let row = sqlx::query(
            "SELECT name, mime_type, bytes FROM forge_artifacts WHERE task_id = $1 AND name = $2",
        )
        .bind(task_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        row.map(|r| {
            Ok(StoredArtifact {
                name: r.try_get("name").map_err(|e| self.query_error(e))?,
                mime_type: r.try_get("mime_type").map_err(|e| self.query_error(e))?,
                bytes: r.try_get("bytes").map_err(|e| self.query_error(e))?,
            })
        })
        .transpose()
    }

    async fn request_cancel(&self, task_id: &str) -> Result<bool, StateError> {
        let sql = format!(
            "UPDATE forge_tasks SET cancel_requested = 1 WHERE id = $1 AND state NOT IN {}",
            final_states_sql()
        );
        let done = sqlx::query(&sql)
            .bind(task_id)
            .execute(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(done.rows_affected() > 0)
    }

    async fn cancel_requested(&self, task_id: &str) -> Result<bool, StateError> {
        let row = sqlx::query("SELECT cancel_requested FROM forge_tasks WHERE id = $1")
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        match row {
            Some(r) => Ok(r
                .try_get::<i32, _>("cancel_requested")
                .map_err(|e| self.query_error(e))?
                != 0),
            None => Ok(false),
        }
    }

    async fn fail_unfinished(
        &self,
        replica: Option<&str>,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT id, context_id, state, replica, task, result, created_ms, updated_ms FROM forge_tasks \
             WHERE state NOT IN {} AND (CAST($1 AS TEXT) IS NULL OR replica = CAST($1 AS TEXT))",
            final_states_sql()
        );
        let rows = sqlx::query(&sql)
            .bind(replica)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let ids = self.mark_failed(&mut tx, &rows, failed).await?;
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(ids)
    }

    async fn fail_orphaned(
        &self,
        alive_since_ms: i64,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError> {
        let mut tx = self.begin_write().await?;
        // Unfinished, not touched since the cut-off, and its replica silent since then.
        let sql = format!(
            "SELECT id, context_id, state, replica, task, result, created_ms, updated_ms FROM forge_tasks \
             WHERE state NOT IN {} AND updated_ms < $1 AND (replica IS NULL OR replica NOT IN \
             (SELECT id FROM forge_replicas WHERE heartbeat_ms >= $1))",
            final_states_sql()
        );
        let rows = sqlx::query(&sql)
            .bind(alive_since_ms)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let ids = self.mark_failed(&mut tx, &rows, failed).await?;
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(ids)
    }

    async fn prune(&self, retention: Retention) -> Result<u64, StateError> {
        let cutoff =
            now_ms().saturating_sub((retention.keep_days as i64).saturating_mul(86_400_000));
        let rows = sqlx::query(
            "SELECT id, created_ms, state FROM forge_tasks ORDER BY created_ms DESC, id DESC",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        let mut doomed = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let state: String = r.try_get("state").map_err(|e| self.query_error(e))?;
            if !crate::store::is_final_state(&state) {
                continue;
            }
            let created: i64 = r.try_get("created_ms").map_err(|e| self.query_error(e))?;
            if (i as u64) >= retention.keep_tasks || created < cutoff {
                doomed.push(
                    r.try_get::<String, _>("id")
                        .map_err(|e| self.query_error(e))?,
                );
            }
        }
        let mut tx = self.begin_write().await?;
        for id in &doomed {
            for table in ["forge_task_events", "forge_artifacts", "forge_messages"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE task_id = $1"))
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.query_error(e))?;
            }
            sqlx::query("DELETE FROM forge_tasks WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
        }
        // Claims whose task never reached the store (its replica died first) and leases of
        // replicas silent for as long go after the same time.
        for sql in [
            "DELETE FROM forge_messages WHERE created_ms < $1 AND task_id NOT IN (SELECT id FROM forge_tasks)",
            "DELETE FROM forge_replicas WHERE heartbeat_ms < $1",
        ] {
            sqlx::query(sql)
                .bind(cutoff)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
        }
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(doomed.len() as u64)
    }

    async fn heartbeat(&self, replica: &str, address: &str) -> Result<(), StateError> {
        sqlx::query(
            "INSERT INTO forge_replicas (id, address, heartbeat_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET address = excluded.address, heartbeat_ms = excluded.heartbeat_ms",
        )
        .bind(replica)
        .bind(address)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    fn forms(&self) -> Option<&dyn crate::store::FormStore> {
        Some(self)
    }

    async fn replica(&self, id: &str) -> Result<Option<ReplicaRecord>, StateError> {
        let row = sqlx::query(
            "SELECT id, address, heartbeat_ms, pid, host FROM forge_replicas WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        row.map(|r| self.replica_from_row(&r)).transpose()
    }

    async fn acquire_lease(
        &self,
        me: &ReplicaRecord,
        sole_since: Option<i64>,
        expiry_ms: i64,
    ) -> Result<(), StateError> {
        let mut tx = self.begin_write().await?;
        if let Some(cut) = sole_since {
            let row = sqlx::query(
                "SELECT id, address, heartbeat_ms, pid, host FROM forge_replicas \
                 WHERE id <> $1 AND heartbeat_ms >= $2 ORDER BY heartbeat_ms DESC LIMIT 1",
            )
            .bind(&me.id)
            .bind(cut)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
            if let Some(r) = row {
                let owner = self.replica_from_row(&r)?;
                return Err(StateError::LeaseHeld {
                    store: self.name.clone(),
                    owner: owner.describe(),
                    age_s: (now_ms() - owner.heartbeat_ms).max(0) / 1000,
                    expiry_s: expiry_ms / 1000,
                });
            }
        }
        sqlx::query(
            "INSERT INTO forge_replicas (id, address, heartbeat_ms, pid, host) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (id) DO UPDATE SET address = excluded.address, heartbeat_ms = excluded.heartbeat_ms, \
             pid = excluded.pid, host = excluded.host",
        )
        .bind(&me.id)
        .bind(&me.address)
        .bind(now_ms())
        .bind(me.pid)
        .bind(me.host.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        tx.commit().await.map_err(|e| self.query_error(e))
    }

    async fn claim_message(
        &self,
        context_id: &str,
        message_id: &str,
        task_id: &str,
        replica: &str,
    ) -> Result<Option<String>, StateError> {
        // Twice at most: the earlier claim's row may be pruned between the insert and the read.
        for _ in 0..2 {
            let done = sqlx::query(
                "INSERT INTO forge_messages (context_id, message_id, task_id, replica, created_ms) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (context_id, message_id) DO NOTHING",
            )
            .bind(context_id)
            .bind(message_id)
            .bind(task_id)
            .bind(replica)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
            if done.rows_affected() > 0 {
                return Ok(None);
            }
            let row = sqlx::query(
                "SELECT task_id FROM forge_messages WHERE context_id = $1 AND message_id = $2",
            )
            .bind(context_id)
            .bind(message_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
            if let Some(r) = row {
                return Ok(Some(r.try_get("task_id").map_err(|e| self.query_error(e))?));
            }
        }
        Err(StateError::Query {
            store: self.name.clone(),
            reason: format!("message {message_id} of conversation {context_id} could not be claimed (its record changed twice while claiming it); retry"),
        })
    }

    async fn release_message(
        &self,
        context_id: &str,
        message_id: &str,
        task_id: &str,
    ) -> Result<(), StateError> {
        sqlx::query(
            "DELETE FROM forge_messages WHERE context_id = $1 AND message_id = $2 AND task_id = $3",
        )
        .bind(context_id)
        .bind(message_id)
        .bind(task_id)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StateError> {
        let rows = sqlx::query(
            "SELECT id, address, heartbeat_ms, pid, host FROM forge_replicas ORDER BY heartbeat_ms DESC",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        rows.iter().map(|r| self.replica_from_row(r)).collect()
    }

    async fn remove_replica(&self, id: &str) -> Result<(), StateError> {
        sqlx::query("DELETE FROM forge_replicas WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn fail_unowned(
        &self,
        alive_since_ms: i64,
        failed: FailedTask<'_>,
    ) -> Result<Vec<String>, StateError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "SELECT id, context_id, state, replica, task, result, created_ms, updated_ms FROM forge_tasks \
             WHERE state NOT IN {} AND (replica IS NULL OR replica NOT IN \
             (SELECT id FROM forge_replicas WHERE heartbeat_ms >= $1))",
            final_states_sql()
        );
        let orphans = sqlx::query(&sql)
            .bind(alive_since_ms)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let ids = self.mark_failed(&mut tx, &orphans, failed).await?;
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(ids)
    }

    async fn profile(&self, name: &str) -> Result<Option<ProfileRecord>, StateError> {
        self.profile_get(name).await
    }

    async fn profiles(&self) -> Result<Vec<ProfileRecord>, StateError> {
        self.profile_list().await
    }

    async fn save_profile(
        &self,
        profile: &ProfileRecord,
        read_version: Option<i64>,
    ) -> Result<ProfileSave, StateError> {
        self.profile_save(profile, read_version).await
    }

    async fn touch_profile(&self, name: &str) -> Result<(), StateError> {
        self.profile_touch(name).await
    }

    async fn delete_profile(&self, name: &str) -> Result<bool, StateError> {
        self.profile_delete(name).await
    }
}
