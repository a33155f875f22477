//! The audit log's hash chain: a log written by `AuditLog` verifies; altering, removing, inserting
//! or reordering a line is detected; appending continues the chain; secrets never reach the file.

use std::io::Cursor;

use forge_runtime::{
    audit_events as events, verify_audit as verify, verify_audit_file as verify_file, AuditLog,
};
use serde_json::json;

fn write_sample(path: &std::path::Path) {
    let log = AuditLog::open_file(path).expect("open audit file");
    log.emit(
        Some("t1"),
        events::SESSION_START,
        json!({"agent_id": "a", "model": "m"}),
    );
    log.emit(
        Some("t1"),
        events::LLM_CALL,
        json!({"provider": "openai", "status": 200}),
    );
    log.emit(
        Some("t1"),
        events::TOOL_EXEC,
        json!({"tool": "datetime_now", "ok": true}),
    );
    log.emit(
        Some("t1"),
        events::EGRESS_BLOCKED,
        json!({"host": "example.com"}),
    );
    log.emit(
        Some("t1"),
        events::SESSION_END,
        json!({"status": "completed"}),
    );
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn verify_lines(
    lines: &[String],
) -> Result<forge_runtime::VerifySummary, forge_runtime::VerifyError> {
    let text = lines.join("\n") + "\n";
    verify(Cursor::new(text))
}

#[test]
fn a_written_log_verifies_and_counts_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    let summary = verify_file(&path).expect("fresh log verifies");
    assert_eq!(summary.events, 5);
    assert_eq!(summary.sessions_started, 1);
    assert_eq!(summary.sessions_ended, 1);
    assert!(summary.counts.contains(&("tool_exec".to_string(), 1)));
    // Every line carries the common fields.
    for (i, l) in lines(&path).iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["seq"], (i + 1) as u64);
        assert_eq!(v["task_id"], "t1");
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(v["hash"].as_str().unwrap().len(), 64);
    }
}

#[test]
fn an_altered_line_is_rejected_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    let mut l = lines(&path);
    l[2] = l[2].replace("datetime_now", "datetime_new");
    assert_ne!(l[2], lines(&path)[2]);
    let err = verify_lines(&l).unwrap_err();
    assert_eq!(err.line, 3);
    assert!(err.reason.contains("altered"), "{err}");
}

#[test]
fn a_removed_middle_or_first_line_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    let mut middle = lines(&path);
    middle.remove(1);
    let err = verify_lines(&middle).unwrap_err();
    assert_eq!(err.line, 2, "{err}");

    let mut first = lines(&path);
    first.remove(0);
    let err = verify_lines(&first).unwrap_err();
    assert_eq!(err.line, 1, "{err}");
}

#[test]
fn reordered_or_duplicated_lines_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    let mut l = lines(&path);
    l.swap(1, 2);
    assert!(verify_lines(&l).is_err());
    let mut d = lines(&path);
    let dup = d[3].clone();
    d.insert(3, dup);
    assert_eq!(verify_lines(&d).unwrap_err().line, 5);
}

#[test]
fn a_recomputed_hash_without_the_chain_is_still_caught() {
    // An attacker who edits a line and fixes its own hash breaks the next line's prev_hash.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    let mut l = lines(&path);
    let body_start = "{\"hash\":\"".len() + 64 + 2;
    let body = format!("{{{}", &l[1][body_start..]).replace("openai", "anthropic");
    let prev: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(prev["hash"].as_str().unwrap().as_bytes());
    h.update(body.as_bytes());
    let new_hash = hex::encode(h.finalize());
    l[1] = format!("{{\"hash\":\"{new_hash}\",{}", &body[1..]);
    let err = verify_lines(&l).unwrap_err();
    assert_eq!(err.line, 3, "{err}");
}

#[test]
fn appending_to_an_existing_log_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    write_sample(&path);
    write_sample(&path);
    let summary = verify_file(&path).expect("appended log verifies");
    assert_eq!(summary.events, 10);
    assert_eq!(summary.sessions_started, 2);
}

#[test]
fn a_file_that_is_not_an_audit_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "hello\n").unwrap();
    let err = AuditLog::open_file(&path).unwrap_err();
    assert!(err.to_string().contains("not a forge audit log"), "{err}");
    assert!(verify_file(&path).is_err());
}

#[test]
fn registered_secrets_never_reach_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    let log = AuditLog::open_file(&path).unwrap();
    log.add_secret("sk-very-secret-value-123");
    log.emit(
        None,
        events::LLM_CALL,
        json!({"error": "401 for key sk-very-secret-value-123", "nested": ["x sk-very-secret-value-123"]}),
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("sk-very-secret-value-123"));
    assert!(text.contains("[SECRET]"));
    verify_file(&path).expect("scrubbed log still verifies");
}

#[test]
fn reserved_keys_in_fields_cannot_forge_chain_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    let log = AuditLog::open_file(&path).unwrap();
    log.emit(
        Some("t"),
        events::TOOL_EXEC,
        json!({"seq": 99, "hash": "x", "tool": "t"}),
    );
    let v: serde_json::Value = serde_json::from_str(&lines(&path)[0]).unwrap();
    assert_eq!(v["seq"], 1);
    verify_file(&path).unwrap();
}

#[test]
fn credential_shapes_are_scrubbed_even_when_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.ndjson");
    let log = AuditLog::open_file(&path).unwrap();
    log.emit(
        Some("t"),
        events::TOOL_EXEC,
        json!({"error": "request to https://api.example.com/v1/x?api_key=abc123SECRETxyz&page=2 timed out; sent Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"}),
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("abc123SECRETxyz"), "{text}");
    assert!(!text.contains("eyJhbGciOiJIUzI1NiJ9"), "{text}");
    assert!(text.contains("api_key=[SECRET]&page=2"), "{text}");
    assert!(text.contains("Bearer [SECRET]"), "{text}");
    verify_file(&path).unwrap();
}
