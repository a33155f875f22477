//! Rows per minute through `forge forms run` (issue 25): a loopback form site (five fields: two
//! text, an email with a pattern-checked postcode, a select, a checkbox), the real forge binary
//! with real Chromium through its egress proxy, no model. For concurrency 1 and 4: 60 rows from
//! a CSV, timed from the command's start to its end (forge's start, Chromium's launch and the
//! form's first load included), checked against the site's count of submissions.
//!
//! Run: `cargo bench -p forge-cli --bench forms --profile dev` (figures in docs/benchmarks.md).

// A bench binary: it prints its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::Command;
use std::time::Instant;

use forge_testkit::site::{Response, Site};

const ROWS: usize = 60;

const FORM: &str = r#"<!doctype html><title>Sign up</title>
<form id="signup" action="/submit" method="post">
<label for="name">Name</label> <input id="name" name="name" required>
<label for="email">Email</label> <input id="email" type="email" name="email" required>
<label for="zip">Postcode</label> <input id="zip" name="zip" pattern="[0-9]{5}" required>
<label for="plan">Plan</label> <select id="plan" name="plan"><option value="basic">Basic</option><option value="pro">Pro</option></select>
<label><input type="checkbox" name="news" value="yes"> Newsletter</label>
<button type="submit">Sign up</button></form>"#;

fn main() {
    if forge_browser::find_browser_binary().is_err() {
        eprintln!("skipped: Chromium is missing (scripts/install-deps.sh browser)");
        return;
    }
    let site = Site::builder().max_connections(5000).start(|r| {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/signup") => Response::html(FORM),
            ("POST", "/submit") => {
                Response::html("<!doctype html><title>Thanks</title><p class=success>Saved</p>")
            }
            _ => Response::not_found(),
        }
    });
    let entry = site.entry();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("skills/portal")).expect("skill dir");
    std::fs::write(
        d.join("skills/portal/SKILL.md"),
        format!("---\nname: portal\ndescription: The portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{entry}\"]\n---\nUse it.\n"),
    )
    .expect("SKILL.md");
    std::fs::write(
        d.join("forge.yaml"),
        "agent_id: bench\nversion: 0.1.0\negress:\n  mode: allowlist\nbrowser:\n  max_sessions: 4\n",
    )
    .expect("forge.yaml");
    let forge = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_forge"))
            .env_remove("FORGE_STATE_URL")
            .current_dir(d)
            .args(args)
            .args(["--config", "forge.yaml"])
            .output()
            .expect("run forge")
    };
    let out = forge(&["forms", "learn", &site.url("/signup")]);
    assert!(
        out.status.success(),
        "learn: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("forms bench: {ROWS} rows per run, 5 fields each, loopback form site, no model");
    println!("concurrency  seconds  rows/min  (forge start and Chromium launch included)");
    for concurrency in [1usize, 4] {
        let mut csv = String::from("name,email,zip,plan,news\n");
        for i in 0..ROWS {
            csv.push_str(&format!(
                "Person {concurrency}-{i},p{i}@example.org,{:05},{},{}\n",
                10000 + i,
                if i % 2 == 0 { "pro" } else { "basic" },
                if i % 3 == 0 { "yes" } else { "no" }
            ));
        }
        let file = format!("rows-{concurrency}.csv");
        std::fs::write(d.join(&file), csv).expect("rows");
        let before = site
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count();
        let t0 = Instant::now();
        let c = concurrency.to_string();
        let batch = format!("bench-{concurrency}");
        let out = forge(&[
            "forms",
            "run",
            "signup",
            &file,
            "--concurrency",
            &c,
            "--batch-id",
            &batch,
        ]);
        let secs = t0.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let posted = site
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
            - before;
        assert_eq!(posted, ROWS, "every row submitted once");
        println!(
            "{concurrency:>11}  {secs:>7.1}  {:>8.0}",
            ROWS as f64 / secs * 60.0
        );
    }
}
