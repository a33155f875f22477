//! The form skills over A2A (issue 25): `forge run` with a browser skill and the scripted model
//! (never asked: no model call per row), real Chromium through the real egress proxy, a loopback
//! form site that records every submission, and the official A2A Python SDK as the client
//! (`forms_a2a_client.py`, `message/stream`).
//!
//! - the card lists `learn-form-schema` and `execute-form-batch`;
//! - learning (input in `metadata`) returns the FormSchema as the answer;
//! - `allowedHosts` outside the agent's policy is refused before any task runs;
//! - a batch of 50 rows (input as JSON text): the site receives exactly the 45 valid rows once
//!   each with their values, 50 progress updates arrive in order, the 5 invalid rows are failed
//!   with the browser's validation message, and the result artifacts list every row;
//! - a form posting to a host outside the scope: the row is refused and that host sees nothing;
//! - the form changes (a field renamed): the batch stops naming the field, nothing is posted.
//!
//! Skips when Chromium or the SDK is missing; fails instead when `FORGE_REQUIRE_BROWSER=1`.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use forge_testkit::site::{Canary, Response, Site};
use serde_json::{json, Value};

fn require(what: &str, ok: bool) -> bool {
    forge_testkit::require(
        ok,
        &format!("{what} is missing (scripts/install-deps.sh browser python)"),
    )
}

// Stops the server when the test ends, however it ends (SIGTERM first, so Chromium goes too).
use forge_testkit::cli::Terminating as Server;

/// The sign-up form; with `renamed` its email field is called `mail`. `/evil` posts to `steal`.
fn form_page(renamed: bool) -> String {
    let email = if renamed { "mail" } else { "email" };
    format!(
        r#"<!doctype html><html><head><title>Sign up</title></head><body>
<form id="signup" action="/submit" method="post">
  <label for="name">Name</label> <input id="name" name="name" required>
  <label for="email">Email</label> <input id="email" type="email" name="{email}" required>
  <label for="zip">Postcode</label> <input id="zip" name="zip" pattern="[0-9]{{5}}" required>
  <label for="plan">Plan</label> <select id="plan" name="plan"><option value="basic">Basic</option><option value="pro">Pro</option></select>
  <label><input type="checkbox" name="news" value="yes"> Newsletter</label>
  <button type="submit">Sign up</button>
</form></body></html>"#
    )
}

/// Form-urlencoded `body` as pairs.
fn pairs(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let dec = |s: &str| {
                let s = s.replace('+', " ");
                let mut out = Vec::new();
                let b = s.as_bytes();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'%' && i + 2 < b.len() {
                        if let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                            out.push(x);
                            i += 3;
                            continue;
                        }
                    }
                    out.push(b[i]);
                    i += 1;
                }
                String::from_utf8_lossy(&out).into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

fn texts(parts: &Value) -> String {
    parts
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|x| x["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The final state of a run's stream and its last status message.
fn final_state(run: &Value) -> (String, String) {
    let last = run["events"]
        .as_array()
        .and_then(|e| e.iter().rev().find(|x| x.get("statusUpdate").is_some()))
        .cloned()
        .unwrap_or(Value::Null);
    (
        last["statusUpdate"]["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        texts(&last["statusUpdate"]["status"]["message"]["parts"]),
    )
}

/// The text of the artifact called `name` in a run's stream.
fn artifact(run: &Value, name: &str) -> Option<String> {
    run["events"].as_array()?.iter().find_map(|e| {
        let a = &e["artifactUpdate"]["artifact"];
        (a["name"] == name).then(|| texts(&a["parts"]))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_are_learned_and_batches_run_over_a2a_with_one_update_per_row() {
    if !require("Chromium", forge_browser::find_browser_binary().is_ok())
        || !require(
            "a2a-sdk for python3",
            forge_testkit::python_has("import a2a.client, httpx"),
        )
    {
        return;
    }
    let canary = Canary::start();
    let renamed = Arc::new(AtomicBool::new(false));
    let flag = renamed.clone();
    let steal = canary.url("/steal");
    let site = Site::builder().max_connections(2000).start(move |r| {
        let path = r.path.split('?').next().unwrap_or("");
        match (r.method.as_str(), path) {
            ("GET", "/signup") => Response::html(form_page(flag.load(Ordering::SeqCst))),
            ("GET", "/evil") => Response::html(
                form_page(false).replace("action=\"/submit\"", &format!("action=\"{steal}\"")),
            ),
            ("POST", "/submit") => Response::html(
                "<!doctype html><title>Thanks</title><p class=success>Welcome aboard</p>",
            ),
            _ => Response::not_found(),
        }
    });
    let entry = site.entry();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("skills/portal")).unwrap();
    std::fs::write(
        dir.path().join("skills/portal/SKILL.md"),
        format!("---\nname: portal\ndescription: Enter data into the portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{entry}\"]\n---\nUse the portal.\n"),
    )
    .unwrap();
    // The model is never asked: a script with no turns would fail any task that asked it.
    std::fs::write(
        dir.path().join("s.yaml"),
        "turns:\n  - text: \"the model was asked\"\n",
    )
    .unwrap();
    let cfg = dir.path().join("forge.yaml");
    std::fs::write(
        &cfg,
        "agent_id: portal\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\negress:\n  mode: allowlist\nbrowser:\n  max_sessions: 2\n",
    )
    .unwrap();
    let stderr_path = dir.path().join("stderr.txt");
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(dir.path().join("audit.ndjson"))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()))
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
        for _ in lines.by_ref() {}
    });
    let first = tokio::task::spawn_blocking(move || {
        rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default()
    })
    .await
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| {
            panic!(
                "no URL printed: {first:?}; stderr: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            )
        })
        .to_string();

    let client = |requests: Value| {
        let url = url.clone();
        async move {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/forms_a2a_client.py");
            let out = tokio::process::Command::new("python3")
                .arg(&script)
                .arg(&url)
                .arg(requests.to_string())
                .output()
                .await
                .unwrap();
            assert!(
                out.status.success(),
                "sdk client failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<Value>(&out.stdout).expect("the client prints JSON")
        }
    };
    let posts = || -> Vec<Vec<(String, String)>> {
        site.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == "/submit")
            .map(|r| pairs(&String::from_utf8_lossy(&r.body)))
            .collect()
    };

    // Learn (fields in metadata), and a scope outside the policy.
    let seen = client(json!([
        {"skill": "learn-form-schema", "via": "metadata", "input": {"url": site.url("/signup"), "allowedHosts": [entry]}},
        {"skill": "learn-form-schema", "via": "metadata", "input": {"url": site.url("/signup"), "allowedHosts": [canary.entry()]}},
    ]))
    .await;
    let skills: Vec<&str> = seen["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        skills.contains(&"learn-form-schema") && skills.contains(&"execute-form-batch"),
        "{skills:?}"
    );
    let learned = &seen["runs"][0];
    let (state, _) = final_state(learned);
    assert_eq!(state, "TASK_STATE_COMPLETED", "{learned}");
    let schema: Value = serde_json::from_str(&artifact(learned, "answer").expect("an answer"))
        .expect("the answer is the FormSchema JSON");
    assert_eq!(schema["slug"], "signup");
    let keys: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["name", "email", "zip", "plan", "news"]);
    let refused = seen["runs"][1]["error"].as_str().unwrap_or("");
    assert!(
        refused.contains("allowedHosts") && refused.contains(&canary.entry()),
        "{}",
        seen["runs"][1]
    );
    canary.assert_untouched("a learn request outside the agent's policy");

    // 50 rows, every tenth with a postcode the page's pattern refuses.
    let rows: Vec<Value> = (0..50)
        .map(|i| {
            json!({
                "name": format!("Person {i}"),
                "email": format!("p{i}@example.org"),
                "zip": if i % 10 == 3 { "12".to_string() } else { format!("{:05}", 10000 + i) },
                "plan": if i % 2 == 0 { "pro" } else { "basic" },
                "news": i % 3 == 0,
            })
        })
        .collect();
    let seen = client(json!([
        {"skill": "execute-form-batch", "via": "text", "input": {"schema": "signup", "rows": rows, "allowedHosts": [entry], "batchId": "b50"}},
    ]))
    .await;
    let run = &seen["runs"][0];
    let (state, last) = final_state(run);
    assert_eq!(state, "TASK_STATE_COMPLETED", "{last}");
    assert!(last.contains("50 rows: 45 done, 5 failed"), "{last}");
    let progress: Vec<String> = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| texts(&e["statusUpdate"]["status"]["message"]["parts"]))
        .filter(|t| t.starts_with("row "))
        .collect();
    let expected: Vec<String> = (0..50)
        .map(|i| {
            format!(
                "row {}/50 {}",
                i + 1,
                if i % 10 == 3 { "failed" } else { "done" }
            )
        })
        .collect();
    assert_eq!(progress, expected);
    let got = posts();
    assert_eq!(got.len(), 45, "exactly the valid rows were submitted");
    for i in (0..50).filter(|i| i % 10 != 3) {
        let name = format!("Person {i}");
        let mine: Vec<&Vec<(String, String)>> = got
            .iter()
            .filter(|p| p.iter().any(|(k, v)| k == "name" && *v == name))
            .collect();
        assert_eq!(mine.len(), 1, "{name} submitted once");
        let p = mine[0];
        let has = |k: &str, v: &str| p.iter().any(|(a, b)| a == k && b == v);
        assert!(has("email", &format!("p{i}@example.org")), "{p:?}");
        assert!(has("zip", &format!("{:05}", 10000 + i)), "{p:?}");
        assert!(
            has("plan", if i % 2 == 0 { "pro" } else { "basic" }),
            "{p:?}"
        );
        assert_eq!(has("news", "yes"), i % 3 == 0, "{p:?}");
    }
    let results: Value =
        serde_json::from_str(&artifact(run, "form-results.json").expect("the results artifact"))
            .expect("results JSON");
    let failed: Vec<&Value> = results["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 5);
    for r in failed {
        let msg = r["message"].as_str().unwrap();
        assert!(
            msg.starts_with("the page refused the values: zip: "),
            "{msg}"
        );
        assert!(
            msg.len() > "the page refused the values: zip: ".len(),
            "{msg}"
        );
    }

    // A form posting to a host outside the scope: refused, and that host sees nothing.
    let seen = client(json!([
        {"skill": "learn-form-schema", "via": "text", "input": {"url": site.url("/evil"), "allowedHosts": [entry], "slug": "evil"}},
        {"skill": "execute-form-batch", "via": "text", "input": {"schema": "evil", "rows": [{"name": "Eve", "email": "e@example.org", "zip": "12345"}], "allowedHosts": [entry]}},
    ]))
    .await;
    let (state, last) = final_state(&seen["runs"][1]);
    assert_eq!(state, "TASK_STATE_COMPLETED", "{last}");
    assert!(last.contains("1 rows: 1 failed"), "{last}");
    canary.assert_untouched("a form that posts outside the batch's scope");
    assert_eq!(posts().len(), 45);

    // The form changes: the batch stops naming the field; nothing is posted.
    renamed.store(true, Ordering::SeqCst);
    let seen = client(json!([
        {"skill": "execute-form-batch", "via": "text", "input": {"schema": "signup", "rows": [{"name": "Late", "email": "l@example.org", "zip": "12345"}], "allowedHosts": [entry]}},
    ]))
    .await;
    let (state, last) = final_state(&seen["runs"][0]);
    assert_eq!(state, "TASK_STATE_FAILED", "{last}");
    assert!(last.contains("field `email` is gone"), "{last}");
    assert!(last.contains("new field `mail`"), "{last}");
    assert_eq!(posts().len(), 45);
    drop(server);
}
