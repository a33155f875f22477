//! A task's egress ledger as HAR 1.2 (`GET /tasks/{id}/egress`, `forge audit har`): one entry per
//! `task_egress` audit event, oldest first. No bodies and no headers (forge's proxy does not keep
//! them); sizes are the bytes each way the proxy or client counted (for a CONNECT tunnel, the
//! whole tunnel), `time` is from the request head to the end of the exchange. forge's decision
//! is in each entry's `_forge` member (HAR's place for custom fields): `decision` (`allowed`,
//! `refused`, `failed`), `rule` (the rule that allowed it, or why it was refused), `tool`, `via`
//! (`proxy`: the browser; `client`: http_request, web_fetch), `host`, `port`.
//!
//! The URL is what the decision knows: scheme, host and port (`https://host/` for a tunnel or
//! port 443, `http://host:port/` else); paths inside a tunnel are not seen by forge.

use std::io::BufRead;

use serde_json::{json, Value};

use super::ledger::TASK_EGRESS;

/// Why an audit log could not be read into a ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarError {
    /// A line could not be read or is not JSON.
    #[error("line {line}: {reason}")]
    Line {
        /// The 1-based line.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// No event of the log names the task.
    #[error("no event in the log names task {0}: check the task id (the A2A task id, or the session of an MCP or `forge tool` run)")]
    UnknownTask(String),
}

/// The HAR 1.2 document of the `task_egress` events of `task_id` among `events`.
pub(crate) fn har<'a>(task_id: &str, events: impl IntoIterator<Item = &'a Value>) -> Value {
    let entries: Vec<Value> = events
        .into_iter()
        .filter(|e| {
            e.get("event").and_then(Value::as_str) == Some(TASK_EGRESS)
                && e.get("task_id").and_then(Value::as_str) == Some(task_id)
        })
        .map(entry)
        .collect();
    json!({
        "log": {
            "version": "1.2",
            "creator": {"name": "forge", "version": env!("CARGO_PKG_VERSION")},
            "pages": [],
            "entries": entries,
            "comment": format!("egress ledger of forge task {task_id}: every request its tools and browser made, with forge's decision in _forge; no bodies"),
        }
    })
}

/// The HAR document for `task_id` from an audit log (NDJSON, one event a line).
pub fn har_from_audit(reader: impl BufRead, task_id: &str) -> Result<Value, HarError> {
    let mut events = Vec::new();
    let mut seen = false;
    for (i, line) in reader.lines().enumerate() {
        let err = |reason: String| HarError::Line {
            line: i as u64 + 1,
            reason,
        };
        let line = line.map_err(|e| err(format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| err(format!("not JSON: {e}")))?;
        if v.get("task_id").and_then(Value::as_str) != Some(task_id) {
            continue;
        }
        seen = true;
        if v.get("event").and_then(Value::as_str) == Some(TASK_EGRESS) {
            events.push(v);
        }
    }
    if !seen {
        return Err(HarError::UnknownTask(task_id.to_string()));
    }
    Ok(har(task_id, &events))
}

fn entry(e: &Value) -> Value {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
    let n = |k: &str| e.get(k).and_then(Value::as_u64);
    let method = match s("method") {
        "" => "GET",
        m => m,
    };
    let host = s("host");
    let port = n("port").unwrap_or(0);
    let tunnel = method.eq_ignore_ascii_case("CONNECT");
    let scheme = if tunnel || port == 443 {
        "https"
    } else {
        "http"
    };
    let host_part = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let url = match (scheme, port) {
        (_, 0) | ("https", 443) | ("http", 80) => format!("{scheme}://{host_part}/"),
        _ => format!("{scheme}://{host_part}:{port}/"),
    };
    let duration = n("duration_ms").unwrap_or(0);
    let started = e
        .get("started_ms")
        .and_then(Value::as_i64)
        .map(|ms| forge_time::rfc3339_millis(ms.div_euclid(1000), ms.rem_euclid(1000) as u32))
        .unwrap_or_else(|| s("time").to_string());
    let status = n("status").unwrap_or(0);
    let bytes_up = n("bytes_up").map_or(-1, |b| b as i64);
    let bytes_down = n("bytes_down").map_or(-1, |b| b as i64);
    let decision = s("decision");
    let status_text = match decision {
        "refused" => "Refused by forge's egress policy",
        "failed" => "Failed after the policy allowed it",
        _ => "",
    };
    let mut entry = json!({
        "startedDateTime": started,
        "time": duration,
        "request": {
            "method": method,
            "url": url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [],
            "queryString": [],
            "headersSize": -1,
            "bodySize": if tunnel { -1 } else { bytes_up },
        },
        "response": {
            "status": status,
            "statusText": status_text,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [],
            "content": {"size": bytes_down.max(0), "mimeType": "x-unknown"},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": if tunnel { -1 } else { bytes_down },
        },
        "cache": {},
        "timings": {"send": 0, "wait": duration, "receive": 0},
        "_forge": {
            "decision": decision,
            "rule": s("rule"),
            "tool": s("tool"),
            "via": s("via"),
            "host": host,
            "port": port,
            "bytesUp": bytes_up,
            "bytesDown": bytes_down,
            "auditSeq": e.get("seq").cloned().unwrap_or(Value::Null),
        },
    });
    if let Some(ip) = e.get("ip").and_then(Value::as_str) {
        entry["serverIPAddress"] = json!(ip);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_this_tasks_egress_only_with_the_decision_and_rule() {
        let evs = [
            json!({"event": "task_egress", "task_id": "a", "method": "CONNECT", "host": "ok.test", "port": 443, "decision": "allowed", "rule": "allowlist entry ok.test", "status": 200, "bytes_up": 10, "bytes_down": 20, "started_ms": 1_700_000_000_123i64, "duration_ms": 5, "tool": "browser_navigate", "via": "proxy"}),
            json!({"event": "task_egress", "task_id": "b", "method": "GET", "host": "other.test", "port": 80, "decision": "allowed"}),
            json!({"event": "tool_exec", "task_id": "a"}),
            json!({"event": "task_egress", "task_id": "a", "method": "GET", "host": "127.0.0.1", "port": 8081, "decision": "refused", "rule": "host not in allowlist", "status": 403, "bytes_up": 0, "bytes_down": 0, "duration_ms": 0, "time": "2026-01-01T00:00:00.000Z"}),
        ];
        let h = har("a", &evs);
        let entries = h["log"]["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), 2, "{h}");
        assert_eq!(entries[0]["request"]["url"], "https://ok.test/");
        assert_eq!(entries[0]["startedDateTime"], "2023-11-14T22:13:20.123Z");
        assert_eq!(entries[0]["request"]["bodySize"], -1);
        assert_eq!(entries[1]["request"]["url"], "http://127.0.0.1:8081/");
        assert_eq!(entries[1]["_forge"]["decision"], "refused");
        assert_eq!(entries[1]["_forge"]["rule"], "host not in allowlist");
        assert_eq!(entries[1]["response"]["status"], 403);
        assert_eq!(h["log"]["version"], "1.2");
    }
}
