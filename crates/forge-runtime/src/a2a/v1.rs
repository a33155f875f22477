//! The A2A 1.0 JSON-RPC binding, as a translation layer over the 0.3 core: 1.0 method names
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`) map to their
//! 0.3 counterparts, 1.0 params are turned into 0.3 params, and 0.3 results and stream events into
//! 1.0 shapes (ProtoJSON: `ROLE_USER`, `TASK_STATE_COMPLETED`, parts as `{text}` / `{data}` /
//! `{url, mediaType, filename}`, results wrapped as `{task}` / `{statusUpdate}` / `{artifactUpdate}`).
//! One task store, one behaviour; only the wire shapes differ.

use serde_json::{json, Map, Value};

/// The 0.3 method a 1.0 method name stands for.
pub(crate) fn method_v03(method: &str) -> Option<&'static str> {
    Some(match method {
        "SendMessage" => "message/send",
        "SendStreamingMessage" => "message/stream",
        "GetTask" => "tasks/get",
        "CancelTask" => "tasks/cancel",
        "SubscribeToTask" => "tasks/resubscribe",
        _ => return None,
    })
}

fn copy(from: &Value, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            if !v.is_null() {
                to.insert((*k).to_string(), v.clone());
            }
        }
    }
}

/// 1.0 params -> 0.3 params for `method` (a 1.0 name).
pub(crate) fn params_from_v1(method: &str, params: &Value) -> Value {
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            let mut out =
                json!({"message": message_from_v1(params.get("message").unwrap_or(&Value::Null))});
            let cfg = params.get("configuration");
            let immediate = cfg
                .and_then(|c| c.get("returnImmediately"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut c = json!({"blocking": !immediate});
            if let Some(h) = cfg.and_then(|c| c.get("historyLength")) {
                c["historyLength"] = h.clone();
            }
            out["configuration"] = c;
            out
        }
        _ => {
            let mut m = Map::new();
            copy(params, &mut m, &["id", "historyLength"]);
            Value::Object(m)
        }
    }
}

fn message_from_v1(m: &Value) -> Value {
    if !m.is_object() {
        return Value::Null;
    }
    let mut out = Map::new();
    out.insert("kind".into(), json!("message"));
    copy(
        m,
        &mut out,
        &["messageId", "contextId", "taskId", "metadata"],
    );
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") | Some("agent") => "agent",
        _ => "user",
    };
    out.insert("role".into(), json!(role));
    let parts: Vec<Value> = m
        .get("parts")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    if let Some(t) = p.get("text") {
                        json!({"kind": "text", "text": t})
                    } else if let Some(d) = p.get("data") {
                        json!({"kind": "data", "data": d})
                    } else if let Some(u) = p.get("url") {
                        json!({"kind": "file", "file": {"uri": u, "mimeType": p.get("mediaType"), "name": p.get("filename")}})
                    } else {
                        json!({"kind": "data", "data": p})
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    out.insert("parts".into(), Value::Array(parts));
    Value::Object(out)
}

fn state_to_v1(s: &str) -> &'static str {
    match s {
        "submitted" => "TASK_STATE_SUBMITTED",
        "working" => "TASK_STATE_WORKING",
        "completed" => "TASK_STATE_COMPLETED",
        "failed" => "TASK_STATE_FAILED",
        "canceled" => "TASK_STATE_CANCELED",
        "input-required" => "TASK_STATE_INPUT_REQUIRED",
        "rejected" => "TASK_STATE_REJECTED",
        "auth-required" => "TASK_STATE_AUTH_REQUIRED",
        _ => "TASK_STATE_UNSPECIFIED",
    }
}

fn part_to_v1(p: &Value) -> Value {
    let mut out = match p.get("kind").and_then(Value::as_str) {
        Some("data") => json!({"data": p.get("data").cloned().unwrap_or(Value::Null)}),
        Some("file") => {
            let f = p.get("file").cloned().unwrap_or(Value::Null);
            let mut m = Map::new();
            if let Some(u) = f.get("uri") {
                m.insert("url".into(), u.clone());
            } else if let Some(b) = f.get("bytes") {
                // ProtoJSON writes `bytes` fields as base64, as 0.3 does.
                m.insert("raw".into(), b.clone());
            }
            if let Some(t) = f.get("mimeType") {
                m.insert("mediaType".into(), t.clone());
            }
            if let Some(n) = f.get("name") {
                m.insert("filename".into(), n.clone());
            }
            Value::Object(m)
        }
        _ => json!({"text": p.get("text").cloned().unwrap_or(json!(""))}),
    };
    if let Some(md) = p.get("metadata") {
        out["metadata"] = md.clone();
    }
    out
}

fn parts_to_v1(v: &Value) -> Value {
    Value::Array(
        v.as_array()
            .map(|ps| ps.iter().map(part_to_v1).collect())
            .unwrap_or_default(),
    )
}

fn message_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    copy(
        m,
        &mut out,
        &["messageId", "contextId", "taskId", "metadata"],
    );
    let role = if m.get("role").and_then(Value::as_str) == Some("agent") {
        "ROLE_AGENT"
    } else {
        "ROLE_USER"
    };
    out.insert("role".into(), json!(role));
    out.insert(
        "parts".into(),
        parts_to_v1(m.get("parts").unwrap_or(&Value::Null)),
    );
    Value::Object(out)
}

fn status_to_v1(s: &Value) -> Value {
    let mut out = Map::new();
    out.insert(
        "state".into(),
        json!(state_to_v1(
            s.get("state").and_then(Value::as_str).unwrap_or("")
        )),
    );
    if let Some(m) = s.get("message") {
        out.insert("message".into(), message_to_v1(m));
    }
    copy(s, &mut out, &["timestamp"]);
    Value::Object(out)
}

fn artifact_to_v1(a: &Value) -> Value {
    let mut out = Map::new();
    copy(
        a,
        &mut out,
        &["artifactId", "name", "description", "metadata"],
    );
    out.insert(
        "parts".into(),
        parts_to_v1(a.get("parts").unwrap_or(&Value::Null)),
    );
    Value::Object(out)
}

/// A 0.3 Task -> a 1.0 Task.
pub(crate) fn task_to_v1(t: &Value) -> Value {
    let mut out = Map::new();
    copy(t, &mut out, &["id", "contextId", "metadata"]);
    out.insert(
        "status".into(),
        status_to_v1(t.get("status").unwrap_or(&Value::Null)),
    );
    let arts = t
        .get("artifacts")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(artifact_to_v1).collect())
        .unwrap_or_default();
    out.insert("artifacts".into(), Value::Array(arts));
    let hist = t
        .get("history")
        .and_then(Value::as_array)
        .map(|h| h.iter().map(message_to_v1).collect())
        .unwrap_or_default();
    out.insert("history".into(), Value::Array(hist));
    Value::Object(out)
}

/// A 0.3 result of `method` (a 1.0 name) -> its 1.0 result.
pub(crate) fn result_to_v1(method: &str, r: &Value) -> Value {
    match method {
        "SendMessage" => json!({"task": task_to_v1(r)}),
        _ => task_to_v1(r),
    }
}

/// A 0.3 stream event (Task, status-update, artifact-update) -> a 1.0 StreamResponse.
pub(crate) fn event_to_v1(ev: &Value) -> Value {
    match ev.get("kind").and_then(Value::as_str) {
        Some("status-update") => {
            let mut u = Map::new();
            copy(ev, &mut u, &["taskId", "contextId", "metadata"]);
            u.insert(
                "status".into(),
                status_to_v1(ev.get("status").unwrap_or(&Value::Null)),
            );
            json!({"statusUpdate": u})
        }
        Some("artifact-update") => {
            let mut u = Map::new();
            copy(
                ev,
                &mut u,
                &["taskId", "contextId", "append", "lastChunk", "metadata"],
            );
            u.insert(
                "artifact".into(),
                artifact_to_v1(ev.get("artifact").unwrap_or(&Value::Null)),
            );
            json!({"artifactUpdate": u})
        }
        _ => json!({"task": task_to_v1(ev)}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_send_becomes_a_v03_send_and_back() {
        let p = params_from_v1(
            "SendMessage",
            &json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}, "configuration": {"returnImmediately": true}}),
        );
        assert_eq!(
            p["message"]["parts"][0],
            json!({"kind": "text", "text": "hi"})
        );
        assert_eq!(p["message"]["role"], "user");
        assert_eq!(p["configuration"]["blocking"], false);
        let task = json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed", "message": {"kind": "message", "role": "agent", "messageId": "a", "parts": [{"kind": "text", "text": "ok"}]}},
            "artifacts": [{"artifactId": "x", "name": "shot.png", "parts": [{"kind": "file", "file": {"uri": "file:///s.png", "mimeType": "image/png", "name": "shot.png"}}]}], "history": []});
        let r = result_to_v1("SendMessage", &task);
        assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(r["task"]["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(
            r["task"]["status"]["message"]["parts"][0],
            json!({"text": "ok"})
        );
        assert_eq!(
            r["task"]["artifacts"][0]["parts"][0],
            json!({"url": "file:///s.png", "mediaType": "image/png", "filename": "shot.png"})
        );
        let ev = event_to_v1(
            &json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true, "status": {"state": "canceled"}}),
        );
        assert_eq!(
            ev,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_CANCELED"}}})
        );
        assert_eq!(method_v03("CancelTask"), Some("tasks/cancel"));
        assert_eq!(method_v03("message/send"), None);
    }

    #[test]
    fn an_inline_file_part_becomes_raw_bytes() {
        let p = part_to_v1(
            &json!({"kind": "file", "file": {"bytes": "iVBORw==", "mimeType": "image/png", "name": "s.png"}}),
        );
        assert_eq!(
            p,
            json!({"raw": "iVBORw==", "mediaType": "image/png", "filename": "s.png"})
        );
    }
}
