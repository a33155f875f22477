//! The A2A side of a task's scope and result, on the task store with a real SQLite state store:
//! `metadata.forge` is checked before a task exists (-32602 naming the field), budgets apply
//! (`max_steps` 1 on a 3-step script ends incomplete), and the result object is the task's
//! `result` artifact (a data part) and the stored task record's `result`, so `tasks/get` on any
//! replica returns it.

use std::sync::Arc;

use forge_llm::scripted::Scripted;
use forge_runtime::AuditLog;
use forge_runtime::TaskStore;
use forge_runtime::{AgentLoop, LoopConfig};
use forge_state::{SqlStore, StateStore, StoreLocation};
use forge_tools::Registry;
use serde_json::{json, Value};

fn agent(dir: &std::path::Path, script: &str) -> Arc<AgentLoop> {
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::math::MathCalculate));
    Arc::new(AgentLoop {
        provider: Arc::new(Scripted::parse(script, std::path::Path::new("s.yaml")).unwrap()),
        tools: Arc::new(reg),
        system_prompt: "test".into(),
        audit: AuditLog::to_writer(Box::new(std::io::sink())),
        config: LoopConfig::default(),
        files_dir: dir.join("files"),
        egress: None,
        sessions: None,
    })
}

fn message(meta: Value) -> Value {
    json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "count"}], "metadata": meta})
}

#[tokio::test]
async fn the_result_object_is_an_artifact_and_kept_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let script = "turns:\n".to_string()
        + &"  - text: \"partial\"\n    tool_calls: [{name: math_calculate, arguments: {expression: \"1+1\"}}]\n"
            .repeat(3)
        + "  - text: done\n";
    let state: Arc<dyn StateStore> = Arc::new(
        SqlStore::open(&StoreLocation::Sqlite(dir.path().join("state.db")))
            .await
            .unwrap(),
    );
    let store = TaskStore::with_state(
        agent(dir.path(), &script),
        state.clone(),
        "replica-1".into(),
        1 << 20,
    );

    // A malformed or too-large budget is refused before any task exists.
    for (meta, field) in [
        (
            json!({"forge": {"max_steps": 0}}),
            "metadata.forge.max_steps",
        ),
        (
            json!({"forge": {"max_seconds": 99999}}),
            "metadata.forge.max_seconds",
        ),
        (json!({"forge": {"maxSteps": 1}}), "metadata.forge.maxSteps"),
    ] {
        let err = store.start(&message(meta), None).unwrap_err();
        assert_eq!(err.code, -32602);
        assert!(err.message.contains(field), "{}", err.message);
    }
    assert_eq!(store.unfinished(), 0);

    let (id, done) = store
        .start(&message(json!({"forge": {"max_steps": 1}})), None)
        .unwrap();
    store.wait(done).await;
    store.flush().await;
    let task = store.get(&id, None).unwrap();
    assert_eq!(task["status"]["state"], "completed");
    let artifact = task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "result")
        .expect("a result artifact")
        .clone();
    assert_eq!(artifact["parts"][0]["kind"], "data");
    let result = &artifact["parts"][0]["data"];
    assert_eq!(result["status"], "incomplete", "{result}");
    assert_eq!(result["steps"], 1);
    assert_eq!(result["answer"], "partial");

    // The stored record (what another replica's tasks/get reads) carries the same object.
    let rec = state.task(&id).await.unwrap().expect("stored");
    assert_eq!(rec.result.as_ref(), Some(result));
    let stored_artifact = rec.task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == "result");
    assert!(stored_artifact);
}
