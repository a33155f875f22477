//! `forge tool list | describe | call` as a user runs them: the real binary, the real proxy, real
//! Chromium (skipped with a message when none is installed, failing under FORGE_REQUIRE_BROWSER=1)
//! and loopback test servers that the test allowlists with `--allow 127.0.0.1:PORT`.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use fixture_agents::fixture_copy as agent_copy;
use forge_testkit::agents as fixture_agents;
use forge_testkit::site::{Canary, Response, Site};

fn forge() -> Command {
    forge_testkit::forge_assert!()
}

fn has_browser(test: &str) -> bool {
    forge_testkit::require_browser(test).is_some()
}

/// A loopback site: `handler(path) -> (content type, body)`; counts hits.
/// Bounded: stops after 40 connections or when the test process ends.
fn serve(handler: fn(&str) -> (&'static str, String)) -> (u16, Site) {
    let site = Site::builder().max_connections(40).start(move |r| {
        let (ctype, body) = handler(&r.path);
        Response::with(200, ctype, body)
    });
    (site.port(), site)
}

fn library(path: &str) -> (&'static str, String) {
    if path.starts_with("/result") {
        let q = path
            .split("q=")
            .nth(1)
            .unwrap_or("")
            .split('&')
            .next()
            .unwrap_or("")
            .to_string();
        (
            "text/html; charset=utf-8",
            format!(
                "<html><head><title>Result</title></head><body><h1>Result</h1>\
                 <div id=\"result\">{q} is on shelf 42. Staff code: LIBRARY-SECRET-4242</div></body></html>"
            ),
        )
    } else if path == "/" {
        (
            "text/html; charset=utf-8",
            "<html><head><title>Library</title></head><body><h1>Library catalogue</h1>\
             <form action=\"/result\" method=\"get\"><label for=\"q\">Title</label>\
             <input id=\"q\" name=\"q\" type=\"text\"><button type=\"submit\">Search</button></form></body></html>"
                .to_string(),
        )
    } else {
        ("text/plain", "not found".to_string())
    }
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

#[test]
fn list_for_an_agent_without_browser_skill() {
    let dir = agent_copy("tools-plain");
    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "list", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent_id"], "tools-plain");
    assert_eq!(v["egress_proxy"], false);
    assert_eq!(v["browser"], false);
    let tools = v["tools"].as_array().unwrap();
    let browser: Vec<&Value> = tools
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("browser_"))
        .collect();
    assert_eq!(browser.len(), forge_skills::BROWSER_TOOLS.len());
    assert!(browser.iter().all(|t| t["present"] == false
        && t["reason"]
            .as_str()
            .unwrap()
            .contains("no active skill declares")));
    let wf = tools.iter().find(|t| t["name"] == "web_fetch").unwrap();
    assert_eq!(wf["present"], false);
    assert!(wf["reason"]
        .as_str()
        .unwrap()
        .contains("denied_tools of skill(s) notes"));
    let mc = tools
        .iter()
        .find(|t| t["name"] == "math_calculate")
        .unwrap();
    assert_eq!(mc["present"], true);

    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let n = forge_skills::BROWSER_TOOLS.len();
    assert!(text.contains(&format!("browser_* ({n} tools)")), "{text}");
    assert!(text.contains("egress proxy: none"), "{text}");
}

#[test]
fn list_for_a_browser_agent_shows_browser_tools_with_the_reason() {
    if !has_browser("list_for_a_browser_agent_shows_browser_tools_with_the_reason") {
        return;
    }
    let dir = agent_copy("tools-browser");
    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "list", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["browser"], true);
    assert_eq!(v["egress_proxy"], true);
    let tools = v["tools"].as_array().unwrap();
    let get = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    for n in [
        "browser_navigate",
        "browser_fill",
        "browser_extract",
        "browser_screenshot",
    ] {
        let t = get(n);
        assert_eq!(t["present"], true, "{n}");
        let r = t["reason"].as_str().unwrap();
        assert!(
            r.contains("shelf-reader") && r.contains("requires.capabilities: [browser]"),
            "{r}"
        );
    }
    let hover = get("browser_hover");
    assert_eq!(hover["present"], false);
    assert!(hover["reason"]
        .as_str()
        .unwrap()
        .contains("denied by denied_tools of skill(s) shelf-reader"));
}

#[test]
fn missing_browser_is_an_actionable_startup_error() {
    let dir = agent_copy("tools-browser");
    let empty = tempfile::tempdir().unwrap();
    // FORGE_BROWSER_BIN names a missing file, and PATH holds no browser either.
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_BROWSER_BIN", "/nonexistent")
        .env("PATH", empty.path())
        .args(["tool", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shelf-reader"), "names the skill: {err}");
    assert!(
        err.contains("FORGE_BROWSER_BIN=/nonexistent"),
        "names what was searched: {err}"
    );
    assert!(
        err.contains("apt-get install chromium"),
        "gives the fix: {err}"
    );
    assert!(
        err.contains("FORGE_BROWSER_BIN=/path"),
        "gives the other fix: {err}"
    );
    assert!(out.stdout.is_empty());

    // Without FORGE_BROWSER_BIN: the PATH names that were looked for.
    let out = forge()
        .current_dir(dir.path())
        .env_remove("FORGE_BROWSER_BIN")
        .env("PATH", empty.path())
        .args([
            "tool",
            "call",
            "browser_navigate",
            "--args",
            "{\"url\":\"http://example.com/\"}",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chromium on PATH") && err.contains("google-chrome on PATH"),
        "{err}"
    );
}

#[test]
fn call_script_drives_the_browser_through_the_proxy() {
    if !has_browser("call_script_drives_the_browser_through_the_proxy") {
        return;
    }
    let (site, site_hits) = serve(library);
    let canary_site = Canary::start();
    let canary = canary_site.port();
    let dir = agent_copy("tools-browser");
    let script = dir.path().join("calls.jsonl");
    std::fs::write(
        &script,
        format!(
            "# navigate, fill and submit, extract, screenshot, then two refused navigations\n\
             {{\"tool\": \"browser_navigate\", \"args\": {{\"url\": \"http://127.0.0.1:{site}/\"}}}}\n\
             {{\"tool\": \"browser_fill\", \"args\": {{\"selector\": \"#q\", \"value\": \"Dune\", \"submit\": true}}}}\n\
             {{\"tool\": \"browser_extract\", \"args\": {{\"selector\": \"#result\"}}}}\n\
             {{\"tool\": \"browser_screenshot\", \"args\": {{\"filename\": \"result.png\"}}}}\n\
             \n\
             {{\"tool\": \"browser_navigate\", \"args\": {{\"url\": \"http://127.0.0.1:{canary}/\"}}}}\n\
             {{\"tool\": \"browser_navigate\", \"args\": {{\"url\": \"http://not-allowed.example/\"}}}}\n"
        ),
    )
    .unwrap();
    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "call", "--script"])
        .arg(&script)
        .args(["--allow", &format!("127.0.0.1:{site}")])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&out.stdout);
    // deny_output applies to every browser result, observations included: the secret on the
    // result page never appears in any output line.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("LIBRARY-SECRET"));
    assert_eq!(lines.len(), 6, "one JSON line per call; stderr: {stderr}");
    for (i, l) in lines.iter().take(4).enumerate() {
        assert_eq!(
            l["ok"],
            true,
            "call {} failed: {l}\nstderr: {stderr}",
            i + 1
        );
    }
    assert!(
        lines[0]["text"]
            .as_str()
            .unwrap()
            .contains("Library catalogue"),
        "{}",
        lines[0]
    );
    // The extract saw the submitted form's result, with the skill's secret redacted, fenced.
    let extract = lines[2]["text"].as_str().unwrap();
    assert!(extract.contains("Dune is on shelf 42"), "{extract}");
    assert!(extract.contains("[REDACTED BY POLICY]"), "{extract}");
    assert!(!extract.contains("LIBRARY-SECRET"), "{extract}");
    assert!(extract.contains("UNTRUSTED_CONTENT_START"), "{extract}");
    // The screenshot is a PNG in this run's workspace under the agent's .forge/files.
    let shot = &lines[3]["data"];
    assert_eq!(shot["mime_type"], "image/png");
    let path = PathBuf::from(shot["path"].as_str().unwrap());
    let files = dir.path().join(".forge/files").canonicalize().unwrap();
    let workspace = path.parent().unwrap().canonicalize().unwrap();
    assert_eq!(workspace.parent().unwrap(), files);
    let ws_name = workspace.file_name().unwrap().to_str().unwrap();
    assert!(
        ws_name.starts_with("ws-") && ws_name.len() == 35,
        "{ws_name}"
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(shot["size_bytes"], bytes.len());
    assert!(
        !lines[3]["text"].as_str().unwrap().contains("iVBOR"),
        "no image bytes in the result"
    );
    // Refused navigations: the proxy's reason, promptly, and the canary never contacted.
    for l in &lines[4..] {
        assert_eq!(l["ok"], false, "{l}");
        assert_eq!(l["kind"], "egress_blocked", "{l}");
        assert!(
            l["error"]
                .as_str()
                .unwrap()
                .starts_with("blocked by egress policy: "),
            "{l}"
        );
    }
    let canary_err = lines[4]["error"].as_str().unwrap();
    assert!(
        canary_err.contains("loopback") && canary_err.contains(&format!("127.0.0.1:{canary}")),
        "{canary_err}"
    );
    let host_err = lines[5]["error"].as_str().unwrap();
    assert!(
        host_err.contains("not-allowed.example is not in this agent's allowlist"),
        "{host_err}"
    );
    canary_site.assert_untouched("the non-allowlisted loopback port");
    assert!(
        site_hits.hits() >= 2,
        "the page and the form result were fetched"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed call makes the exit code 1"
    );
}

#[test]
fn call_describe_and_usage_errors() {
    let dir = agent_copy("tools-plain");
    let out = forge()
        .current_dir(dir.path())
        .args([
            "tool",
            "call",
            "math_calculate",
            "--args",
            "{\"expression\": \"2^10 + 1\"}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = &json_lines(&out.stdout)[0];
    assert_eq!(l["ok"], true);
    assert_eq!(l["data"]["result"], 1025);

    // A guardrail hit is a failed call (exit 1), with the rule's message.
    let out = forge()
        .current_dir(dir.path())
        .args([
            "tool",
            "call",
            "json_parse",
            "--args",
            "{\"json\": \"\\\"DROP TABLE users\\\"\"}",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let l = &json_lines(&out.stdout)[0];
    assert_eq!(l["kind"], "guardrail");
    assert!(l["error"]
        .as_str()
        .unwrap()
        .contains("SQL statements that drop tables are not allowed"));

    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "call", "math_calculate", "--args", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args is not valid JSON"));

    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "describe", "http_request", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["input_schema"]["required"][0], "url");

    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "describe", "browser_navigate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no active skill declares"));

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"tool\": \"math_calculate\"}\n{not json\n").unwrap();
    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "call", "--script"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.jsonl:2"),
        "names file and line"
    );
}

#[test]
fn list_under_lightpanda_says_why_tools_are_absent() {
    let Some(lp) =
        forge_testkit::require_lightpanda("list_under_lightpanda_says_why_tools_are_absent")
    else {
        return;
    };
    let dir = agent_copy("tools-browser");
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_BROWSER_ENGINE", "lightpanda")
        .env("FORGE_LIGHTPANDA_BIN", &lp)
        .args(["tool", "list", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v["tools"].as_array().unwrap();
    let get = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    for n in ["browser_navigate", "browser_fill", "browser_extract"] {
        let t = get(n);
        assert_eq!(t["present"], true, "{n}");
        assert!(t["reason"].as_str().unwrap().contains("Lightpanda"), "{t}");
    }
    for (n, missing) in [
        ("browser_screenshot", "no screenshots"),
        ("browser_drag", "no drag or layout"),
        ("browser_select_text", "no text selection or layout"),
    ] {
        let t = get(n);
        assert_eq!(t["present"], false, "{n}");
        let r = t["reason"].as_str().unwrap();
        assert!(
            r.contains(&format!(
                "browser.engine is lightpanda, which has {missing}"
            )) && r.contains("use engine: chromium"),
            "{n}: {r}"
        );
    }
}

/// When the browser skill chose Lightpanda itself (forge.yaml says nothing), the reason points
/// at the skill's `requires.browser_engine`, not at forge.yaml's `browser.engine`.
#[test]
fn list_when_the_skill_chose_lightpanda_points_at_the_skill() {
    let Some(lp) = forge_testkit::require_lightpanda(
        "list_when_the_skill_chose_lightpanda_points_at_the_skill",
    ) else {
        return;
    };
    let dir = agent_copy("tools-browser");
    let skill = dir.path().join("skills/shelf-reader/SKILL.md");
    let text = std::fs::read_to_string(&skill).unwrap();
    let chosen = text.replacen(
        "      capabilities: [browser]\n",
        "      capabilities: [browser]\n      browser_engine: lightpanda\n",
        1,
    );
    assert_ne!(chosen, text, "the fixture's requires block was found");
    std::fs::write(&skill, chosen).unwrap();
    let out = forge()
        .current_dir(dir.path())
        .env_remove("FORGE_BROWSER_ENGINE")
        .env("FORGE_LIGHTPANDA_BIN", &lp)
        .args(["tool", "list", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v["tools"].as_array().unwrap();
    let shot = tools
        .iter()
        .find(|t| t["name"] == "browser_screenshot")
        .unwrap();
    assert_eq!(shot["present"], false, "{shot}");
    let r = shot["reason"].as_str().unwrap();
    assert!(
        r.contains(
            "(shelf-reader) chose lightpanda in requires.browser_engine, which has no screenshots"
        ) && r.contains("browser_engine: chromium")
            && !r.contains("browser.engine is"),
        "{r}"
    );
    let nav = tools
        .iter()
        .find(|t| t["name"] == "browser_navigate")
        .unwrap();
    assert_eq!(nav["present"], true, "{nav}");
}

#[test]
fn missing_lightpanda_and_a_bad_engine_are_actionable_startup_errors() {
    let dir = agent_copy("tools-browser");
    let empty = tempfile::tempdir().unwrap();
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_BROWSER_ENGINE", "lightpanda")
        .env_remove("FORGE_LIGHTPANDA_BIN")
        .env("PATH", empty.path())
        .args(["tool", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shelf-reader"), "names the skill: {err}");
    assert!(
        err.contains("lightpanda on PATH"),
        "what was searched: {err}"
    );
    assert!(
        err.contains("pip install lightpanda") && err.contains("FORGE_LIGHTPANDA_BIN"),
        "gives the fixes: {err}"
    );
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_BROWSER_ENGINE", "webkit")
        .args(["tool", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FORGE_BROWSER_ENGINE=webkit is not a browser engine"),
        "{err}"
    );
}
