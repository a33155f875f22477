//! `forge forms learn | list | run` (issue 25) on real Chromium through the real egress proxy and
//! a loopback form site: learn prints the schema and keeps it, list shows it, run submits a CSV
//! (one invalid row failed with the browser's message, exit 1) and writes the results file;
//! running the same batch id again submits nothing more; a JSONL file works the same.
//!
//! Skips when Chromium is missing; fails instead when `FORGE_REQUIRE_BROWSER=1`.

use std::process::Command;

use forge_testkit::site::{Response, Site};
use serde_json::Value;

const FORM: &str = r#"<!doctype html><title>Sign up</title>
<form id="signup" action="/submit" method="post">
<label for="name">Name</label> <input id="name" name="name" required>
<label for="zip">Postcode</label> <input id="zip" name="zip" pattern="[0-9]{5}">
<label><input type="checkbox" name="news" value="yes"> News</label>
<button type="submit">Sign up</button></form>"#;

fn forge(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_forge"))
        .env_remove("FORGE_STATE_URL")
        .current_dir(dir)
        .args(args)
        .args(["--config", "forge.yaml"])
        .output()
        .expect("run forge")
}

#[test]
fn learn_list_and_run_a_csv_from_the_command_line() {
    if !forge_testkit::require(
        forge_browser::find_browser_binary().is_ok(),
        "Chromium is missing (scripts/install-deps.sh browser)",
    ) {
        return;
    }
    let site = Site::start(|r| match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/signup") => Response::html(FORM),
        ("POST", "/submit") => Response::html("<!doctype html><title>Thanks</title><p>Saved</p>"),
        _ => Response::not_found(),
    });
    let entry = site.entry();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("skills/portal")).unwrap();
    std::fs::write(
        d.join("skills/portal/SKILL.md"),
        format!("---\nname: portal\ndescription: The portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{entry}\"]\n---\nUse it.\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("forge.yaml"),
        "agent_id: portal\nversion: 0.1.0\negress:\n  mode: allowlist\n",
    )
    .unwrap();

    let out = forge(d, &["forms", "learn", &site.url("/signup")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: Value = serde_json::from_slice(&out.stdout).expect("the schema on stdout");
    assert_eq!(schema["slug"], "signup");
    assert_eq!(schema["fields"].as_array().map(Vec::len), Some(3));

    let out = forge(d, &["forms", "list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(&format!("sites/{entry}/forms/signup  3 fields")),
        "{listed}"
    );

    std::fs::write(
        d.join("rows.csv"),
        "name,zip,news\n\"Lovelace, Ada\",12345,yes\nBad Zip,12,\nBob,54321,no\n",
    )
    .unwrap();
    let out = forge(
        d,
        &[
            "forms",
            "run",
            "signup",
            "rows.csv",
            "--batch-id",
            "cli-1",
            "--results",
            "out.json",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "one row failed: {stderr}");
    assert!(
        stderr.contains("row 2/3 failed: the page refused the values: zip: "),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("3 rows: 2 done, 1 failed"), "{stdout}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out.json")).unwrap()).unwrap();
    let statuses: Vec<&str> = results["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["done", "failed", "done"]);
    let posts: Vec<String> = site
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert!(
        posts[0].contains("name=Lovelace%2C+Ada") && posts[0].contains("news=yes"),
        "{posts:?}"
    );
    assert!(
        posts[1].contains("name=Bob") && !posts[1].contains("news="),
        "{posts:?}"
    );

    // The same batch again: every row was done or failed, nothing is sent.
    let out = forge(
        d,
        &["forms", "run", "signup", "rows.csv", "--batch-id", "cli-1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(d.join("form-results-cli-1.csv").is_file());
    assert_eq!(
        site.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        2
    );

    // JSONL rows, a new batch.
    std::fs::write(
        d.join("rows.jsonl"),
        "{\"name\": \"Cleo\", \"zip\": \"11111\", \"news\": true}\n",
    )
    .unwrap();
    let out = forge(
        d,
        &[
            "forms",
            "run",
            "signup",
            "rows.jsonl",
            "--batch-id",
            "cli-2",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        site.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        3
    );
}

/// Stopping a batch (SIGTERM to `forge forms run`, the same cancellation as A2A `tasks/cancel`)
/// lets the row in flight finish and starts no other; the same batch id then goes on with the
/// rows not reached, each submitted once.
#[test]
fn a_stopped_batch_finishes_its_row_in_flight_and_goes_on_later() {
    if !forge_testkit::require(
        forge_browser::find_browser_binary().is_ok(),
        "Chromium is missing (scripts/install-deps.sh browser)",
    ) {
        return;
    }
    let site = Site::builder().max_connections(500).start(|r| {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/signup") => Response::html(FORM),
            ("POST", "/submit") => {
                Response::html("<!doctype html><title>Thanks</title><p>Saved</p>")
                    .delayed(std::time::Duration::from_millis(1500))
            }
            _ => Response::not_found(),
        }
    });
    let entry = site.entry();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("skills/portal")).unwrap();
    std::fs::write(
        d.join("skills/portal/SKILL.md"),
        format!("---\nname: portal\ndescription: The portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{entry}\"]\n---\nUse it.\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("forge.yaml"),
        "agent_id: portal\nversion: 0.1.0\negress:\n  mode: allowlist\n",
    )
    .unwrap();
    let out = forge(d, &["forms", "learn", &site.url("/signup")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut csv = String::from("name,zip\n");
    for i in 0..6 {
        csv.push_str(&format!("Row {i},1000{i}\n"));
    }
    std::fs::write(d.join("rows.csv"), csv).unwrap();
    let posts = || {
        site.requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    };
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .env_remove("FORGE_STATE_URL")
        .current_dir(d)
        .args([
            "forms",
            "run",
            "signup",
            "rows.csv",
            "--batch-id",
            "stop-1",
            "--config",
            "forge.yaml",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start forge forms run");
    // Bounded wait for the second post (its answer takes 1.5 s: the row is in flight).
    let mut waited = 0;
    while posts() < 2 {
        assert!(waited < 1200, "two rows were not posted within 120 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("forge forms run ends");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("6 rows: 2 done, 4 pending"), "{stdout}");
    assert!(stdout.contains("stopped: cancelled"), "{stdout}");
    assert_eq!(posts(), 2, "the row in flight finished, no other started");
    let out = forge(
        d,
        &["forms", "run", "signup", "rows.csv", "--batch-id", "stop-1"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("6 rows: 6 done"));
    let mut names: Vec<String> = site
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 6, "each row once: {names:?}");
    assert_eq!(posts(), 6);
}
