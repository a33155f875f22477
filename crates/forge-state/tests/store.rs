//! The state store on real databases: a SQLite file in a temp dir, and a real PostgreSQL server
//! (Debian's `postgresql`, installed by scripts/install-deps.sh) started by the test with `initdb`
//! and `pg_ctl` in its own temp dir on a loopback port, stopped and removed at the end. The same
//! conformance checks run on both; then what only one of them shows (a corrupt SQLite file, a
//! newer schema, an unreachable server, two replicas sharing one server).

use std::path::PathBuf;

use forge_state::{
    ContextRecord, ProfileRecord, ProfileSave, ReplicaRecord, Retention, SqlStore, StateError,
    StateStore, StoreLocation, StoredArtifact, TaskRecord,
};
use serde_json::json;

fn task(id: &str, state: &str, replica: Option<&str>, created_ms: i64) -> TaskRecord {
    TaskRecord {
        id: id.into(),
        context_id: format!("ctx-{id}"),
        state: state.into(),
        replica: replica.map(str::to_string),
        task: json!({"kind": "task", "id": id, "status": {"state": state}, "history": [{"kind": "message", "parts": [{"kind": "text", "text": format!("hello {id}")}]}]}),
        result: None,
        created_ms,
        updated_ms: created_ms,
    }
}

/// The caller's rewrite of a task the store marks failed: the status says `failed` with `reason`
/// as its message (the store itself knows records, not the A2A task shape).
fn failed_with(reason: &'static str) -> impl Fn(&TaskRecord) -> serde_json::Value + Send + Sync {
    move |t: &TaskRecord| {
        let mut task = t.task.clone();
        task["status"] = json!({"state": "failed", "message": {"kind": "message", "role": "agent",
            "taskId": t.id, "contextId": t.context_id, "parts": [{"kind": "text", "text": reason}]}});
        task
    }
}

/// The newest schema version this build writes.
fn known_version() -> i64 {
    forge_state::MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

fn lease(id: &str, pid: i64) -> ReplicaRecord {
    ReplicaRecord {
        id: id.into(),
        address: format!("http://127.0.0.1:{pid}/"),
        heartbeat_ms: 0,
        pid: Some(pid),
        host: Some("host-a".into()),
    }
}

/// Leases: an exclusive lease is refused while another replica's is fresh, naming it; a stale
/// one does not block; `fail_unowned` fails only the tasks of replicas whose lease has expired.
async fn leases(store: &dyn StateStore) {
    // The replica of the checks before is done.
    store.remove_replica("replica-a").await.expect("remove");
    let now = forge_state::now_ms();
    store
        .acquire_lease(&lease("lease-a", 4001), Some(now - 30_000), 30_000)
        .await
        .expect("the first lease");
    let a = store.replica("lease-a").await.expect("r").expect("leased");
    assert_eq!((a.pid, a.host.as_deref()), (Some(4001), Some("host-a")));
    assert!(a.heartbeat_ms >= now, "{a:?}");
    // A heartbeat renews it and keeps pid and host.
    store
        .heartbeat("lease-a", "http://127.0.0.1:9/")
        .await
        .expect("hb");
    let a = store.replica("lease-a").await.expect("r").expect("leased");
    assert_eq!(
        (a.pid, a.address.as_str()),
        (Some(4001), "http://127.0.0.1:9/")
    );
    let err = store
        .acquire_lease(&lease("lease-b", 4002), Some(now - 30_000), 30_000)
        .await
        .expect_err("a second exclusive lease is refused");
    let msg = err.to_string();
    assert!(matches!(err, StateError::LeaseHeld { .. }), "{msg}");
    assert!(
        msg.contains("lease-a") && msg.contains("pid 4001 on host-a"),
        "names the owner: {msg}"
    );
    assert!(
        msg.contains("http://127.0.0.1:9/"),
        "and its address: {msg}"
    );
    assert!(
        msg.contains("stop that process") && msg.contains("PostgreSQL"),
        "the fix: {msg}"
    );
    assert_eq!(
        store.replica("lease-b").await.expect("r"),
        None,
        "nothing written"
    );
    // A cut-off after A's last renewal: A's lease has expired, B takes one.
    let later = forge_state::now_ms() + 1;
    // B renews after the cut-off.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store
        .acquire_lease(&lease("lease-b", 4002), Some(later), 30_000)
        .await
        .expect("an expired lease does not block");
    let ids: Vec<String> = store
        .replicas()
        .await
        .expect("replicas")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert!(
        ids.contains(&"lease-a".to_string()) && ids.contains(&"lease-b".to_string()),
        "{ids:?}"
    );
    // Tasks of A (expired: its lease is older than the cut-off), of B (live) and of no replica:
    // only B's survive fail_unowned.
    for (id, r) in [
        ("own-a", Some("lease-a")),
        ("own-b", Some("lease-b")),
        ("own-none", None),
    ] {
        store
            .save_task(&task(id, "working", r, now))
            .await
            .expect("save");
    }
    let mut failed = store
        .fail_unowned(later, &failed_with("interrupted by restart"))
        .await
        .expect("fail_unowned");
    failed.retain(|id| id.starts_with("own-"));
    failed.sort();
    assert_eq!(failed, vec!["own-a".to_string(), "own-none".to_string()]);
    assert_eq!(
        store.task("own-b").await.expect("b").map(|t| t.state),
        Some("working".into())
    );
    let a_task = store.task("own-a").await.expect("a").expect("kept");
    assert_eq!(a_task.state, "failed");
    assert_eq!(
        a_task.task["status"]["message"]["parts"][0]["text"],
        "interrupted by restart"
    );
    store.remove_replica("lease-a").await.expect("remove");
    assert_eq!(store.replica("lease-a").await.expect("r"), None);
}

/// The checks every store passes.
async fn conformance(store: &dyn StateStore) {
    let now = forge_state::now_ms();
    // Tasks: insert, read back, replace.
    assert_eq!(store.task("t1").await.ok().flatten(), None);
    let mut t1 = task("t1", "working", Some("replica-a"), now);
    store.save_task(&t1).await.expect("save t1");
    assert_eq!(store.task("t1").await.expect("get t1"), Some(t1.clone()));
    t1.state = "completed".into();
    t1.result = Some(json!({"status": "done", "answer": "42", "steps": 3}));
    t1.task["status"]["state"] = json!("completed");
    t1.updated_ms = now + 5;
    store.save_task(&t1).await.expect("update t1");
    let back = store.task("t1").await.expect("get t1").expect("t1 exists");
    assert_eq!(back.state, "completed");
    assert_eq!(back.result, t1.result);
    assert_eq!(back.task["history"][0]["parts"][0]["text"], "hello t1");

    // Events: numbered from 1, in order, paged.
    for i in 0..5 {
        let seq = store
            .append_event("t1", &json!({"kind": "status-update", "n": i}))
            .await
            .expect("append");
        assert_eq!(seq, i + 1);
    }
    let evs = store.events_after("t1", 2, 2).await.expect("events");
    assert_eq!(
        evs.iter()
            .map(|(s, e)| (*s, e["n"].clone()))
            .collect::<Vec<_>>(),
        vec![(3, json!(2)), (4, json!(3))]
    );
    assert!(store
        .events_after("t2", 0, 10)
        .await
        .expect("none")
        .is_empty());

    // Contexts.
    let ctx = ContextRecord {
        id: "c1".into(),
        messages: json!([{"role": "user", "text": "first"}]),
        browser_replica: Some("replica-a".into()),
        scope: Some(json!({"allowed_hosts": ["a.test"]})),
        updated_ms: now,
    };
    store.save_context(&ctx).await.expect("save ctx");
    assert_eq!(store.context("c1").await.expect("ctx"), Some(ctx.clone()));
    let ctx2 = ContextRecord {
        browser_replica: None,
        scope: None,
        ..ctx.clone()
    };
    store.save_context(&ctx2).await.expect("replace ctx");
    assert_eq!(store.context("c1").await.expect("ctx"), Some(ctx2));

    // Artifacts: bytes round-trip (including NUL and 0xFF).
    let png = StoredArtifact {
        name: "shot.png".into(),
        mime_type: "image/png".into(),
        bytes: vec![0x89, b'P', b'N', b'G', 0, 0xff, 7],
    };
    store.save_artifact("t1", &png).await.expect("artifact");
    assert_eq!(
        store.artifact("t1", "shot.png").await.expect("read"),
        Some(png.clone())
    );
    assert_eq!(store.artifact("t2", "shot.png").await.expect("read"), None);

    // Cancel: requested only for unfinished tasks.
    let t2 = task("t2", "working", Some("replica-a"), now + 1);
    store.save_task(&t2).await.expect("save t2");
    assert!(!store.cancel_requested("t2").await.expect("flag"));
    assert!(store.request_cancel("t2").await.expect("cancel t2"));
    assert!(store.cancel_requested("t2").await.expect("flag"));
    assert!(!store.request_cancel("t1").await.expect("t1 is final"));
    assert!(!store.request_cancel("nope").await.expect("unknown"));

    // Interrupted: unfinished tasks of one replica become failed with the reason.
    let t3 = task("t3", "submitted", Some("replica-b"), now + 2);
    store.save_task(&t3).await.expect("save t3");
    let failed = store
        .fail_unfinished(Some("replica-a"), &failed_with("interrupted by restart"))
        .await
        .expect("fail");
    assert_eq!(failed, vec!["t2".to_string()]);
    let t2b = store.task("t2").await.expect("t2").expect("t2 exists");
    assert_eq!(t2b.state, "failed");
    assert_eq!(t2b.task["status"]["state"], "failed");
    assert_eq!(
        t2b.task["status"]["message"]["parts"][0]["text"],
        "interrupted by restart"
    );
    assert_eq!(
        store.task("t3").await.expect("t3").map(|t| t.state),
        Some("submitted".into())
    );
    let all = store
        .fail_unfinished(None, &failed_with("interrupted by shutdown"))
        .await
        .expect("all");
    assert_eq!(all, vec!["t3".to_string()]);

    // Retention: keep_tasks keeps the newest; old finished tasks go by age; a running task stays.
    let old = now - 10 * 86_400_000;
    store
        .save_task(&task("old", "completed", None, old))
        .await
        .expect("old");
    store
        .append_event("old", &json!({"n": 0}))
        .await
        .expect("old event");
    store
        .save_artifact("old", &png)
        .await
        .expect("old artifact");
    store
        .save_task(&task("old-running", "working", Some("replica-c"), old))
        .await
        .expect("old running");
    let removed = store
        .prune(Retention {
            keep_tasks: 100,
            keep_days: 7,
        })
        .await
        .expect("prune by age");
    assert_eq!(removed, 1);
    assert_eq!(store.task("old").await.expect("old"), None);
    assert!(store
        .events_after("old", 0, 10)
        .await
        .expect("ev")
        .is_empty());
    assert_eq!(store.artifact("old", "shot.png").await.expect("a"), None);
    assert!(store.task("old-running").await.expect("r").is_some());
    // Now t1, t2, t3 (finished) and old-running: keep 2 => the oldest finished beyond the
    // newest two go (t1 is the oldest finished; old-running is never removed).
    let removed = store
        .prune(Retention {
            keep_tasks: 2,
            keep_days: 7,
        })
        .await
        .expect("prune by count");
    assert_eq!(removed, 1, "t1 goes, old-running stays");
    assert_eq!(store.task("t1").await.expect("t1"), None);
    assert!(store.task("t3").await.expect("t3").is_some());
    assert!(store.task("old-running").await.expect("r").is_some());

    // Replicas.
    store
        .heartbeat("replica-a", "http://127.0.0.1:1/")
        .await
        .expect("hb");
    let r = store.replica("replica-a").await.expect("r").expect("known");
    assert_eq!(r.address, "http://127.0.0.1:1/");
    store
        .heartbeat("replica-a", "http://127.0.0.1:2/")
        .await
        .expect("hb2");
    assert_eq!(
        store
            .replica("replica-a")
            .await
            .expect("r")
            .map(|r| r.address),
        Some("http://127.0.0.1:2/".into())
    );
    assert_eq!(store.replica("replica-z").await.expect("none"), None);
    leases(store).await;
    messages(store).await;
}

/// A message is accepted once: the first claim wins, a second (another replica, a retry) gets
/// the first's task id; another conversation's message with the same id is its own.
fn profile(name: &str, ciphertext: &[u8]) -> ProfileRecord {
    ProfileRecord {
        name: name.into(),
        origins: vec!["http://127.0.0.1:4711".into()],
        ciphertext: ciphertext.to_vec(),
        nonce: vec![7; 12],
        key_id: "k:0123".into(),
        size_bytes: 42,
        created_ms: 0,
        updated_ms: 0,
        last_used_ms: None,
        version: 0,
    }
}

/// Login profiles: `a` saves, `b` (another replica, or the same store) reads; saves are
/// optimistic (a save naming a version that is no longer stored writes nothing).
async fn profiles(a: &dyn StateStore, b: &dyn StateStore) {
    assert_eq!(a.profile("portal").await.expect("read"), None);
    // The first save names no version; a second "first save" is stale.
    let p = profile("portal", &[1, 2, 3, 0, 255]);
    assert_eq!(
        a.save_profile(&p, None).await.expect("save"),
        ProfileSave::Saved { version: 1 }
    );
    assert_eq!(
        b.save_profile(&profile("portal", b"other"), None)
            .await
            .expect("save"),
        ProfileSave::Stale { current: Some(1) }
    );
    let got = b.profile("portal").await.expect("read").expect("saved");
    assert_eq!(got.ciphertext, vec![1, 2, 3, 0, 255], "bytes kept exactly");
    assert_eq!(got.nonce, vec![7; 12]);
    assert_eq!(got.origins, vec!["http://127.0.0.1:4711".to_string()]);
    assert_eq!((got.version, got.size_bytes), (1, 42));
    assert!(got.created_ms > 0 && got.last_used_ms.is_some());
    // Two tasks read version 1; the first to save wins, the second is told and writes nothing.
    assert_eq!(
        b.save_profile(&profile("portal", b"from b"), Some(1))
            .await
            .expect("save"),
        ProfileSave::Saved { version: 2 }
    );
    assert_eq!(
        a.save_profile(&profile("portal", b"from a"), Some(1))
            .await
            .expect("save"),
        ProfileSave::Stale { current: Some(2) }
    );
    assert_eq!(
        a.profile("portal")
            .await
            .expect("read")
            .expect("kept")
            .ciphertext,
        b"from b".to_vec()
    );
    a.touch_profile("portal").await.expect("touch");
    a.save_profile(&profile("other", b"x"), None)
        .await
        .expect("save");
    let names: Vec<String> = b
        .profiles()
        .await
        .expect("list")
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, vec!["other".to_string(), "portal".to_string()]);
    assert!(b.delete_profile("other").await.expect("delete"));
    assert!(!a.delete_profile("other").await.expect("delete again"));
    assert_eq!(a.profile("other").await.expect("read"), None);
}

async fn messages(store: &dyn StateStore) {
    assert_eq!(
        store
            .claim_message("ctx-m", "msg-1", "task-1", "replica-a")
            .await
            .expect("claim"),
        None
    );
    assert_eq!(
        store
            .claim_message("ctx-m", "msg-1", "task-2", "replica-b")
            .await
            .expect("claim again"),
        Some("task-1".to_string())
    );
    assert_eq!(
        store
            .claim_message("ctx-other", "msg-1", "task-3", "replica-b")
            .await
            .expect("other conversation"),
        None
    );
}

/// Two stores on one SQLite file (two processes): one exclusive owner; and a write lock another
/// connection keeps past the busy timeout is a clear error naming the file and the fix.
#[tokio::test]
async fn sqlite_has_one_owner_and_a_held_lock_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let loc = StoreLocation::Sqlite(path.clone());
    let first = SqlStore::open(&loc).await.expect("first");
    let second = SqlStore::open(&loc).await.expect("second");
    let cut = forge_state::now_ms() - 30_000;
    first
        .acquire_lease(&lease("first", 111), Some(cut), 30_000)
        .await
        .expect("first owner");
    let err = second
        .acquire_lease(&lease("second", 222), Some(cut), 30_000)
        .await
        .expect_err("the second is refused");
    assert!(err.to_string().contains("replica first"), "{err}");
    // Another process holds SQLite's write lock for longer than the busy timeout.
    use sqlx::{ConnectOptions, Connection};
    let mut holder = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .expect("raw connect");
    sqlx::raw_sql("BEGIN IMMEDIATE; DELETE FROM forge_replicas WHERE id = 'nobody';")
        .execute(&mut holder)
        .await
        .expect("take the write lock");
    let started = std::time::Instant::now();
    let err = second
        .save_task(&task("blocked", "working", None, forge_state::now_ms()))
        .await
        .expect_err("the write cannot get the lock");
    let msg = err.to_string();
    assert!(matches!(err, StateError::Locked { .. }), "{msg}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(4),
        "it waited for the lock (busy timeout) before failing: {:?}",
        started.elapsed()
    );
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    assert!(msg.contains("fuser"), "says how to find the holder: {msg}");
    sqlx::raw_sql("COMMIT")
        .execute(&mut holder)
        .await
        .expect("release");
    let _ = holder.close().await;
    second
        .save_task(&task("unblocked", "working", None, forge_state::now_ms()))
        .await
        .expect("once released, writes go through");
    // Retention also removes a claim whose task never reached the store, and old leases.
    assert_eq!(
        first
            .claim_message("ctx-p", "msg-p", "never-written", "first")
            .await
            .expect("claim"),
        None
    );
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    first
        .prune(Retention {
            keep_tasks: 1000,
            keep_days: 0,
        })
        .await
        .expect("prune");
    assert_eq!(
        first
            .claim_message("ctx-p", "msg-p", "task-again", "first")
            .await
            .expect("claim again"),
        None,
        "the orphan claim was pruned"
    );
    assert_eq!(first.replicas().await.expect("replicas"), vec![]);
    first.close().await;
    second.close().await;
}

/// Form schemas and batch rows (issue 25): `(host, slug)` keys a schema, a batch opens once and
/// resumes as it is, a row is claimed by one caller only, a row left `submitting` is `uncertain`
/// on resume (never `pending` again). On PostgreSQL, `other` is a second replica on the same
/// database: the claim holds across replicas.
async fn forms(store: &dyn StateStore, other: &dyn StateStore) {
    use forge_state::{BatchRecord, FormRecord, RowState};
    let f = store.forms().expect("the SQL store keeps forms");
    let g = other.forms().expect("the SQL store keeps forms");
    let rec = FormRecord {
        host: "127.0.0.1:8080".into(),
        slug: "signup".into(),
        schema: json!({"slug": "signup", "fields": [{"key": "email"}]}),
        fingerprint: "sha256:aa".into(),
        updated_ms: 5,
    };
    f.save_form(&rec).await.expect("save");
    let mut newer = rec.clone();
    newer.fingerprint = "sha256:bb".into();
    newer.updated_ms = 6;
    g.save_form(&newer).await.expect("replace");
    assert_eq!(
        f.form("127.0.0.1:8080", "signup").await.expect("read"),
        Some(newer.clone())
    );
    assert_eq!(newer.key(), "sites/127.0.0.1:8080/forms/signup");
    assert_eq!(
        f.form("127.0.0.1:8081", "signup").await.expect("read"),
        None
    );
    let mut second = rec.clone();
    second.slug = "contact".into();
    f.save_form(&second).await.expect("save");
    let slugs: Vec<String> = g
        .forms()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.slug)
        .collect();
    assert_eq!(slugs, vec!["contact".to_string(), "signup".to_string()]);

    let head = BatchRecord {
        id: "batch-1".into(),
        host: rec.host.clone(),
        slug: rec.slug.clone(),
        fingerprint: "sha256:bb".into(),
        total: 0,
    };
    let rows = vec![
        json!({"email": "a@x"}),
        json!({"email": "b@x"}),
        json!({"email": "c@x"}),
    ];
    let (b, got, resumed) = f.open_batch(&head, &rows).await.expect("open");
    assert!(!resumed);
    assert_eq!(b.total, 3);
    assert!(got.iter().all(|r| r.state == RowState::Pending));
    assert_eq!(got[1].data, rows[1]);
    // One claim wins, on either replica.
    assert!(f.claim_row("batch-1", 0, "a").await.expect("claim"));
    assert!(!g.claim_row("batch-1", 0, "b").await.expect("claim again"));
    f.finish_row("batch-1", 0, RowState::Done, None)
        .await
        .expect("done");
    assert!(!f.claim_row("batch-1", 0, "a").await.expect("a done row"));
    // Claimed, then nothing sent: back to pending.
    assert!(g.claim_row("batch-1", 1, "b").await.expect("claim"));
    g.unclaim_row("batch-1", 1).await.expect("unclaim");
    assert!(g.claim_row("batch-1", 1, "b").await.expect("claim again"));
    // Row 1 is left `submitting` (the process died); resuming with other rows keeps the first.
    let (b, got, resumed) = g
        .open_batch(&head, &[json!({"email": "other"})])
        .await
        .expect("resume");
    assert!(resumed);
    assert_eq!(b.total, 3);
    let states: Vec<RowState> = got.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        vec![RowState::Done, RowState::Uncertain, RowState::Pending]
    );
    assert!(got[1]
        .message
        .as_deref()
        .unwrap_or("")
        .contains("not sent again"));
    assert!(!f
        .claim_row("batch-1", 1, "a")
        .await
        .expect("an uncertain row"));
    f.finish_row(
        "batch-1",
        2,
        RowState::Failed,
        Some("Postcode: use 5 digits"),
    )
    .await
    .expect("failed");
    let got = g.batch_rows("batch-1").await.expect("rows");
    assert_eq!(got[2].state, RowState::Failed);
    assert_eq!(got[2].message.as_deref(), Some("Postcode: use 5 digits"));
}

#[tokio::test]
async fn sqlite_store_keeps_forms_and_batch_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loc = StoreLocation::Sqlite(dir.path().join("state.db"));
    let store = SqlStore::open(&loc).await.expect("open sqlite");
    forms(&store, &store).await;
    store.close().await;
    let again = SqlStore::open(&loc).await.expect("reopen");
    let rows = again
        .forms()
        .expect("forms")
        .batch_rows("batch-1")
        .await
        .expect("rows");
    assert_eq!(rows.len(), 3, "kept across a reopen");
    again.close().await;
}

#[tokio::test]
async fn sqlite_store_keeps_everything_across_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A space and a non-ASCII letter in the path: the URL conversion must keep them.
    let path = dir
        .path()
        .join("agent dir é")
        .join(".forge")
        .join("state.db");
    let loc = StoreLocation::Sqlite(path.clone());
    let store = SqlStore::open(&loc).await.expect("open sqlite");
    assert_eq!(store.kind(), "sqlite");
    conformance(&store).await;
    profiles(&store, &store).await;
    store.close().await;
    assert!(
        path.is_file(),
        "the database file is where it was asked to be"
    );
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let again = SqlStore::open(&loc).await.expect("reopen");
    assert_eq!(
        again.schema_version().await.expect("version"),
        known_version()
    );
    assert!(
        wal.exists(),
        "WAL mode leaves a -wal file next to the database while open"
    );
    let t3 = again
        .task("t3")
        .await
        .expect("t3")
        .expect("kept across reopen");
    assert_eq!(t3.state, "failed");
    assert_eq!(
        again.context("c1").await.expect("ctx").map(|c| c.messages),
        Some(json!([{"role": "user", "text": "first"}]))
    );
    again.close().await;
}

#[tokio::test]
async fn sqlite_store_refuses_oversized_artifacts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqlStore::open(&StoreLocation::Sqlite(dir.path().join("s.db")))
        .await
        .expect("open")
        .with_max_artifact_bytes(1024);
    let big = StoredArtifact {
        name: "big.bin".into(),
        mime_type: "application/octet-stream".into(),
        bytes: vec![1; 1025],
    };
    let err = store.save_artifact("t", &big).await.expect_err("refused");
    let msg = err.to_string();
    assert!(matches!(
        err,
        StateError::ArtifactTooLarge {
            size: 1025,
            limit: 1024,
            ..
        }
    ));
    assert!(
        msg.contains("big.bin") && msg.contains("state.max_artifact_bytes"),
        "{msg}"
    );
    assert_eq!(store.artifact("t", "big.bin").await.expect("read"), None);
    let ok = StoredArtifact {
        bytes: vec![1; 1024],
        ..big
    };
    store
        .save_artifact("t", &ok)
        .await
        .expect("at the limit is kept");
}

#[tokio::test]
async fn a_corrupt_sqlite_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    std::fs::write(&path, vec![0x42u8; 8192]).expect("garbage");
    let err = SqlStore::open(&StoreLocation::Sqlite(path.clone()))
        .await
        .err()
        .expect("a garbage file is refused");
    let msg = err.to_string();
    assert!(matches!(err, StateError::Open { .. }), "{msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    assert!(msg.contains("move it aside"), "says the fix: {msg}");
}

#[tokio::test]
async fn a_store_from_a_newer_forge_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let store = SqlStore::open(&StoreLocation::Sqlite(path.clone()))
        .await
        .expect("open");
    store.close().await;
    // A newer forge recorded schema version 99.
    {
        use sqlx::ConnectOptions;
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .expect("raw connect");
        sqlx::query(
            "INSERT INTO forge_schema (version, name, applied_ms) VALUES (99, 'future', 0)",
        )
        .execute(&mut conn)
        .await
        .expect("insert");
    }
    let err = SqlStore::open(&StoreLocation::Sqlite(path))
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            StateError::TooNew {
                found: 99,
                known,
                ..
            } if known == known_version()
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

use forge_testkit::pg;
use pg::{free_port, PgServer, PG_PASSWORD};

#[tokio::test]
async fn postgres_store_conformance_and_two_replicas() {
    let pg = PgServer::start();
    let loc = StoreLocation::Postgres(pg.url.clone());
    assert!(!loc.display().contains(PG_PASSWORD), "{}", loc.display());
    // Two replicas open the same database at once: the migration runs once.
    let (a, b) = tokio::join!(SqlStore::open(&loc), SqlStore::open(&loc));
    let a = a.expect("replica A opens");
    let b = b.expect("replica B opens");
    assert_eq!(a.kind(), "postgres");
    assert_eq!(b.schema_version().await.expect("v"), known_version());
    conformance(&a).await;
    profiles(&a, &b).await;
    forms(&a, &b).await;
    // What A wrote, B reads; a cancel asked on B is seen by A.
    let t = task(
        "shared",
        "working",
        Some("replica-a"),
        forge_state::now_ms(),
    );
    a.save_task(&t).await.expect("A saves");
    assert_eq!(b.task("shared").await.expect("B reads"), Some(t));
    a.append_event("shared", &json!({"n": 1}))
        .await
        .expect("ev");
    assert_eq!(
        b.events_after("shared", 0, 10).await.expect("B events"),
        vec![(1, json!({"n": 1}))]
    );
    assert!(b.request_cancel("shared").await.expect("B cancels"));
    assert!(a.cancel_requested("shared").await.expect("A sees it"));
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn postgres_errors_name_the_server_and_never_the_password() {
    let pg = PgServer::start();
    // Wrong password.
    let wrong = pg.url.replace(PG_PASSWORD, "not-the-Password-9");
    let err = SqlStore::open(&StoreLocation::Postgres(wrong))
        .await
        .err()
        .expect("wrong password refused");
    let msg = err.to_string();
    assert!(!msg.contains("not-the-Password-9"), "{msg}");
    assert!(
        msg.contains(&format!("127.0.0.1:{}", pg.port)),
        "names the server: {msg}"
    );
    assert!(msg.contains("password"), "says what to check: {msg}");
    // Nothing listening.
    let closed = free_port();
    let url = format!("postgres://forge:{PG_PASSWORD}@127.0.0.1:{closed}/postgres");
    let err = SqlStore::open(&StoreLocation::Postgres(url))
        .await
        .err()
        .expect("unreachable refused");
    let msg = err.to_string();
    assert!(!msg.contains(PG_PASSWORD), "{msg}");
    assert!(msg.contains(&format!("127.0.0.1:{closed}")), "{msg}");
    assert!(msg.contains("running and reachable"), "{msg}");
}
