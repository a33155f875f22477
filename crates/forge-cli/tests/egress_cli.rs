//! `forge egress check` and `forge egress serve` end to end: exit codes, printed decisions, a real
//! request through the standalone proxy to a loopback upstream, clean stop on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use forge_testkit::site::{Response, Site};
use predicates::prelude::*;

/// `forge` run in an empty directory, so that no ./forge.yaml is picked up implicitly.
struct Forge {
    _cwd: tempfile::TempDir,
    cmd: assert_cmd::Command,
}

impl std::ops::Deref for Forge {
    type Target = assert_cmd::Command;
    fn deref(&self) -> &Self::Target {
        &self.cmd
    }
}

impl std::ops::DerefMut for Forge {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.cmd
    }
}

fn forge() -> Forge {
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = forge_testkit::forge_assert!();
    cmd.current_dir(cwd.path());
    Forge { _cwd: cwd, cmd }
}

#[test]
fn check_allowed_prints_rule_and_resolved_addresses() {
    forge()
        .args([
            "egress",
            "check",
            "https://api.example.com/v1",
            "--allow",
            "*.example.com",
        ])
        .args([
            "--resolve",
            "api.example.com=93.184.216.34,2606:2800:220:1:248:1893:25c8:1946",
        ])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("decision: allowed"))
        .stdout(predicate::str::contains(
            "rule:     entry `*.example.com` (--allow)",
        ))
        .stdout(predicate::str::contains(
            "resolved: 93.184.216.34, 2606:2800:220:1:248:1893:25c8:1946",
        ));
}

#[test]
fn check_blocked_host_exits_3() {
    forge()
        .args([
            "egress",
            "check",
            "http://evil.test/",
            "--allow",
            "example.com",
        ])
        .args(["--resolve", "evil.test=93.184.216.34"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("decision: blocked"))
        .stdout(predicate::str::contains(
            "blocked by egress policy: evil.test is not in this agent's allowlist",
        ));
}

#[test]
fn check_metadata_ip_and_internal_answers_exit_3() {
    forge()
        .args([
            "egress",
            "check",
            "http://169.254.169.254/latest/meta-data/",
        ])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("reason:   blocked-ip"))
        .stdout(predicate::str::contains("cloud metadata"));
    forge()
        .args([
            "egress",
            "check",
            "http://wild.example.com/",
            "--allow",
            "*.example.com",
        ])
        .args(["--resolve", "wild.example.com=93.184.216.34,10.0.0.7"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains(
            "wild.example.com resolves to 10.0.0.7",
        ))
        .stdout(predicate::str::contains(
            "resolved: 93.184.216.34, 10.0.0.7",
        ));
}

#[test]
fn check_malformed_exits_2() {
    for url in [
        "http://0x7f000001/",
        "http://127.1/",
        "http://user@example.com/",
        "gopher://example.com/",
    ] {
        forge()
            .args(["egress", "check", url, "--allow", "example.com"])
            .assert()
            .code(2)
            .stdout(predicate::str::contains("decision: malformed"));
    }
}

#[test]
fn check_reads_forge_yaml_and_skill_egress_domains() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: egress-test\nversion: 0.1.0\nframework: forge\nmodel:\n  provider: openai\n  name: gpt-4o-mini\n\
         egress:\n  mode: allowlist\n  allowed_domains:\n    - docs.example.com\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("skills/fetcher")).unwrap();
    std::fs::write(
        dir.path().join("skills/fetcher/SKILL.md"),
        "---\nname: fetcher\ndescription: Fetches things.\nmetadata:\n  forge:\n    egress_domains:\n      - api.fetcher.example\n---\n# Fetcher\n",
    )
    .unwrap();
    let cfg = dir.path().join("forge.yaml");
    forge()
        .args(["egress", "check", "https://docs.example.com/"])
        .arg("--config")
        .arg(&cfg)
        .args(["--resolve", "docs.example.com=93.184.216.34"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "forge.yaml egress.allowed_domains",
        ));
    forge()
        .args(["egress", "check", "https://api.fetcher.example/"])
        .arg("--config")
        .arg(&cfg)
        .args(["--resolve", "api.fetcher.example=93.184.216.34"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("skill fetcher egress_domains"));
    forge()
        .args(["egress", "check", "https://other.example.com/"])
        .arg("--config")
        .arg(&cfg)
        .assert()
        .code(3);
}

#[test]
fn bad_allow_entry_is_a_clear_error() {
    forge()
        .args([
            "egress",
            "check",
            "http://example.com/",
            "--allow",
            "https://example.com/path",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--allow"))
        .stderr(predicate::str::contains("write just the host"));
}

/// A loopback site answering `hello through forge` (at most 4 connections).
fn upstream() -> u16 {
    Site::builder()
        .max_connections(4)
        .start(|_| Response::bare(200, "hello through forge"))
        .port()
}

/// `forge egress serve` (with `flags`) allowing the upstream on port `up`, started in `cwd`: the
/// child (stdout's first line read, stderr piped) and the proxy address it printed.
fn spawn_serve(cwd: &std::path::Path, flags: &[&str], up: u16) -> (std::process::Child, String) {
    let mut child = Command::cargo_bin("forge")
        .unwrap()
        .current_dir(cwd)
        .args(["egress", "serve"])
        .args(flags)
        .args(["--allow", &format!("127.0.0.1:{up}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("proxy listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}

#[test]
fn serve_proxies_allowed_requests_refuses_others_and_stops_on_sigterm() {
    let up = upstream();
    let cwd = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_serve(cwd.path(), &[], up);

    let exchange = |req: String| -> String {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let ok = exchange(format!(
        "GET http://127.0.0.1:{up}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    ));
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.ends_with("hello through forge"),
        "{ok}"
    );
    let blocked = exchange(
        "GET http://169.254.169.254/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
    );
    assert!(blocked.starts_with("HTTP/1.1 403"), "{blocked}");
    assert!(
        blocked.contains("blocked by egress policy: 169.254.169.254"),
        "{blocked}"
    );

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("forge egress serve did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(exit.success(), "exit {exit:?}; stderr {stderr}");
    assert!(stderr.contains("egress allowed GET 127.0.0.1"), "{stderr}");
    assert!(
        stderr.contains("egress blocked GET 169.254.169.254"),
        "{stderr}"
    );
    assert!(stderr.contains("egress proxy stopped"), "{stderr}");
}

/// `--quiet`: refusals are logged, allowed requests are not; the lines are written while the proxy
/// runs (batched, at the latest every 100 ms), not only at shutdown.
#[test]
fn serve_quiet_logs_refusals_only_and_writes_them_while_running() {
    let up = upstream();
    let cwd = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_serve(cwd.path(), &["--quiet"], up);
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let exchange = |req: String| -> String {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let ok = exchange(format!(
        "GET http://127.0.0.1:{up}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    ));
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let blocked = exchange(
        "GET http://169.254.169.254/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
    );
    assert!(blocked.starts_with("HTTP/1.1 403"), "{blocked}");
    // The refusal's line arrives while the proxy still runs (bounded: 10 s, 200 lines).
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while lines.len() < 200 && Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let done = l.contains("egress blocked GET 169.254.169.254");
                lines.push(l);
                if done {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("egress blocked GET 169.254.169.254")),
        "no refusal line while running: {lines:?}"
    );
    assert!(child.try_wait().unwrap().is_none(), "still running");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("forge egress serve did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The rest of stderr (the reader ends at EOF, the process has exited).
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(l);
    }
    assert!(
        lines.iter().any(|l| l.contains("egress proxy stopped")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("egress allowed")),
        "--quiet logged an allowed request: {lines:?}"
    );
}

#[test]
fn bad_private_cidr_in_forge_yaml_points_at_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: egress-test\nversion: 0.1.0\nframework: forge\nmodel:\n  provider: openai\n  name: gpt-4o-mini\n\
         egress:\n  mode: allowlist\n  allowed_private_cidrs:\n    - 10.20.0.1/16\n",
    )
    .unwrap();
    forge()
        .args(["egress", "check", "http://example.com/"])
        .arg("--config")
        .arg(dir.path().join("forge.yaml"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "forge.yaml:10: invalid egress.allowed_private_cidrs value \"10.20.0.1/16\"",
        ))
        .stderr(predicate::str::contains("write 10.20.0.0/16"));
}

#[test]
fn serve_caps_tunnels_at_forge_yaml_max_tunnels_with_a_prompt_429() {
    // A loopback listener for the tunnel to reach; the open tunnel just sits on it.
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = target.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        format!(
            "agent_id: egress-test\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [\"127.0.0.1:{port}\"]\n  max_tunnels: 1\n"
        ),
    )
    .unwrap();
    let mut child = Command::cargo_bin("forge")
        .unwrap()
        .current_dir(dir.path())
        .args(["egress", "serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("proxy listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let connect = || -> (String, TcpStream) {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        // Bounded by the read timeout and the size.
        while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
            match s.read(&mut b) {
                Ok(1) => head.push(b[0]),
                _ => break,
            }
        }
        (String::from_utf8_lossy(&head).into_owned(), s)
    };
    let (first, _open) = connect();
    let (second, _) = connect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(second.starts_with("HTTP/1.1 429"), "{second}");
    assert!(
        second.to_ascii_lowercase().contains("retry-after: 1"),
        "{second}"
    );
}
