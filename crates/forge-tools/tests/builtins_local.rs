//! Builtins that need no network: cli_execute (shell refusal, allowlist, minimal env, proxy env,
//! output cap, timeout), file_create confinement, skill script tools. Real processes throughout.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use forge_tools::builtins::cli_execute::{CliConfig, CliExecute, CliSetupError};
use forge_tools::builtins::file_create::FileCreate;
use forge_tools::builtins::script::{find_script, ScriptLookup, ScriptTool};
use forge_tools::{Tool, ToolContext, ToolError};
use serde_json::{json, Value};

fn cfg(bins: &[&str]) -> CliConfig {
    CliConfig {
        allowed_binaries: bins.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn ctx(dir: &Path) -> ToolContext {
    ToolContext::new("test", dir.join(".forge/files"))
}

#[test]
fn cli_execute_refuses_shells_and_launchers_at_startup() {
    for bad in [
        "bash", "sh", "zsh", "dash", "/bin/sh", "env", "sudo", "xargs",
    ] {
        let err = CliExecute::new(cfg(&["ls", bad]), None).unwrap_err();
        assert!(matches!(err, CliSetupError::Shell { .. }), "{bad}: {err}");
        assert!(
            err.to_string().contains("can never be allowlisted"),
            "{err}"
        );
    }
    // A symlink with an innocent name that resolves to a shell is refused by what it really is.
    let dir = tempfile::tempdir().unwrap();
    let bash = forge_tools::builtins::process::which_in("bash", &std::env::var("PATH").unwrap())
        .expect("bash on PATH");
    std::os::unix::fs::symlink(&bash, dir.path().join("innocent")).unwrap();
    let err =
        CliExecute::with_path(cfg(&["innocent"]), None, dir.path().to_str().unwrap()).unwrap_err();
    assert!(err.to_string().contains("resolves to"), "{err}");
    // Relative paths and empty lists are configuration errors.
    assert!(matches!(
        CliExecute::new(cfg(&["./ls"]), None),
        Err(CliSetupError::BadName { .. })
    ));
    assert!(matches!(
        CliExecute::new(cfg(&[]), None),
        Err(CliSetupError::Empty)
    ));
}

/// Programs that run the program named in their arguments are launchers too: with any one of them
/// allowlisted (a skill's `requires.bins` is enough), `X bash -c ...` runs anything.
#[test]
fn cli_execute_refuses_every_command_runner_as_a_launcher() {
    for bad in [
        "time",
        "/usr/bin/time",
        "setarch",
        "linux64",
        "prlimit",
        "setpriv",
        "systemd-run",
        "run-parts",
        "sg",
        "capsh",
        "strace",
        "ltrace",
        "fakeroot",
        "firejail",
        "bwrap",
        "proot",
        "torsocks",
        "proxychains4",
        "parallel",
        "start-stop-daemon",
        "numactl",
        "unbuffer",
        "faketime",
        "ld-linux-x86-64.so.2",
        "toybox",
    ] {
        let err = CliExecute::new(cfg(&["ls", bad]), None).unwrap_err();
        assert!(matches!(err, CliSetupError::Shell { .. }), "{bad}: {err}");
    }
}

#[tokio::test]
async fn cli_execute_refuses_unlisted_binaries_at_call_time() {
    let dir = tempfile::tempdir().unwrap();
    let tool = CliExecute::new(cfg(&["echo"]), None).unwrap();
    let err = tool
        .execute(&ctx(dir.path()), json!({"binary": "ls", "args": ["/"]}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidInput(_)), "{err}");
    assert!(
        err.to_string().contains("`ls` is not an allowed binary"),
        "{err}"
    );
    let err = tool
        .execute(
            &ctx(dir.path()),
            json!({"binary": "bash", "args": ["-c", "id"]}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("shells are never allowed"),
        "{err}"
    );
    // A path to an allowed program's file is not its name either.
    let err = tool
        .execute(&ctx(dir.path()), json!({"binary": "/bin/echo"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not an allowed binary"), "{err}");
}

#[tokio::test]
async fn cli_execute_runs_without_a_shell_with_minimal_env_and_proxy_env() {
    let dir = tempfile::tempdir().unwrap();
    let tool = CliExecute::new(
        CliConfig {
            env_passthrough: vec!["CARGO_PKG_NAME".into()],
            ..cfg(&["echo", "printenv"])
        },
        Some("http://127.0.0.1:45678".into()),
    )
    .unwrap();
    let c = ctx(dir.path());
    // Shell syntax is passed through literally: no expansion, no command substitution.
    let out = tool
        .execute(
            &c,
            json!({"binary": "echo", "args": ["$HOME", "$(id)", "a;b", "*"]}),
        )
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["stdout"], "$HOME $(id) a;b *\n");
    assert_eq!(data["exit_code"], 0);
    assert_eq!(data["truncated"], false);
    assert_eq!(data["stderr"], "");

    let out = tool
        .execute(&c, json!({"binary": "printenv"}))
        .await
        .unwrap();
    let env: Vec<String> = out.data.unwrap()["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert!(
            env.contains(&format!("{k}=http://127.0.0.1:45678")),
            "{k} missing in {env:?}"
        );
    }
    assert!(env.contains(&"NO_PROXY=".to_string()), "{env:?}");
    // Passthrough works; everything else cargo put in our environment does not leak.
    assert!(
        env.iter().any(|l| l == "CARGO_PKG_NAME=forge-tools"),
        "{env:?}"
    );
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert!(
        !env.iter().any(|l| l.starts_with("CARGO_MANIFEST_DIR=")),
        "{env:?}"
    );
    let names: Vec<&str> = env
        .iter()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for n in &names {
        let allowed = forge_tools::builtins::process::BASE_ENV.contains(n)
            || *n == "CARGO_PKG_NAME"
            || n.to_ascii_uppercase().ends_with("_PROXY");
        assert!(
            allowed,
            "unexpected variable {n} in the child's environment"
        );
    }
}

#[tokio::test]
async fn cli_execute_reports_exit_codes_caps_output_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let tool = CliExecute::new(
        CliConfig {
            max_output_bytes: 1000,
            timeout: Duration::from_millis(500),
            ..cfg(&["seq", "sleep", "ls"])
        },
        None,
    )
    .unwrap();
    let out = tool
        .execute(&c, json!({"binary": "seq", "args": ["1", "100000"]}))
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1000);
    assert!(out["stdout"].as_str().unwrap().starts_with("1\n2\n3\n"));
    assert_eq!(out["truncated"], true);
    assert_eq!(out["exit_code"], 0);

    let out = tool
        .execute(
            &c,
            json!({"binary": "ls", "args": ["/definitely/not/here"]}),
        )
        .await
        .unwrap()
        .data
        .unwrap();
    assert_ne!(out["exit_code"], 0);
    assert!(
        out["stderr"]
            .as_str()
            .unwrap()
            .contains("/definitely/not/here"),
        "{out}"
    );

    let err = tool
        .execute(&c, json!({"binary": "sleep", "args": ["30"]}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout(_)), "{err}");
}

#[tokio::test]
async fn file_create_stays_inside_the_files_dir() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let files = dir.path().join(".forge/files");
    let out = FileCreate
        .execute(&c, json!({"filename": "../../escape.txt", "content": "hi"}))
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["filename"], "escape.txt");
    assert_eq!(data["mime_type"], "text/plain");
    assert_eq!(data["size_bytes"], 2);
    let path = Path::new(data["path"].as_str().unwrap());
    assert_eq!(path.parent().unwrap(), files.canonicalize().unwrap());
    assert_eq!(std::fs::read_to_string(path).unwrap(), "hi");
    assert!(!dir.path().join("escape.txt").exists());

    // base64 content
    let out = FileCreate
        .execute(
            &c,
            json!({"filename": "x.png", "content": "iVBORw0KGgo=", "encoding": "base64"}),
        )
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["mime_type"], "image/png");
    assert_eq!(
        std::fs::read(data["path"].as_str().unwrap()).unwrap(),
        b"\x89PNG\r\n\x1a\n"
    );

    // A symlink planted in the files dir is not followed.
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "original").unwrap();
    std::os::unix::fs::symlink(&outside, files.join("planted.txt")).unwrap();
    let err = FileCreate
        .execute(
            &c,
            json!({"filename": "planted.txt", "content": "overwritten"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("planted.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original");

    // The files dir itself being a symlink is refused.
    let d2 = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d2.path().join(".forge")).unwrap();
    std::os::unix::fs::symlink(dir.path(), d2.path().join(".forge/files")).unwrap();
    let err = FileCreate
        .execute(
            &ctx(d2.path()),
            json!({"filename": "a.txt", "content": "x"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

/// An existing entry is replaced only when it is a regular file of its own: a hard link planted in
/// the files dir (by an allowlisted program such as `tar` or `ln`) must not let `file_create` write
/// through it into a file outside, and a FIFO must not hang the call.
#[tokio::test]
async fn file_create_does_not_write_through_hard_links_or_block_on_fifos() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let files = dir.path().join(".forge/files");
    std::fs::create_dir_all(&files).unwrap();
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "original").unwrap();
    std::fs::hard_link(&outside, files.join("linked.txt")).unwrap();
    let err = FileCreate
        .execute(
            &c,
            json!({"filename": "linked.txt", "content": "overwritten"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("linked.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original");

    let fifo = files.join("pipe.txt");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        FileCreate.execute(&c, json!({"filename": "pipe.txt", "content": "x"})),
    )
    .await
    .expect("file_create must not block on a FIFO");
    assert!(r.is_err(), "a FIFO is not a regular file");

    // A regular file of the same name is still replaced.
    std::fs::write(files.join("plain.txt"), "old content").unwrap();
    let out = FileCreate
        .execute(&c, json!({"filename": "plain.txt", "content": "new"}))
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["size_bytes"], 3);
    assert_eq!(
        std::fs::read_to_string(files.join("plain.txt")).unwrap(),
        "new"
    );
}

/// A program that leaves its process group (setsid) while holding stdout must not keep the call
/// waiting for EOF after the program itself has exited.
#[tokio::test]
async fn a_child_that_escapes_the_process_group_does_not_hang_the_call() {
    if !Path::new("/usr/bin/setsid").exists() {
        eprintln!("skipped: /usr/bin/setsid not installed");
        return;
    }
    let skill = tempfile::tempdir().unwrap();
    write_script(
        skill.path(),
        "escape.sh",
        "echo started\n/usr/bin/setsid sleep 15 &\nexit 0\n",
    );
    let path_var = std::env::var("PATH").unwrap();
    let ScriptLookup::Found {
        script,
        interpreter,
    } = find_script(skill.path(), "escape", &path_var)
    else {
        panic!("script not found")
    };
    let tool = ScriptTool {
        name: "escape".into(),
        skill: "demo".into(),
        description: "d".into(),
        script,
        interpreter,
        env_passthrough: vec![],
        proxy_url: None,
        confine: None,
        timeout: Duration::from_secs(60),
    };
    let start = std::time::Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(8),
        tool.execute(&ctx(skill.path()), json!({})),
    )
    .await
    .expect("the call must end soon after the script exited")
    .unwrap();
    assert!(out.text.contains("started"), "{}", out.text);
    assert!(start.elapsed() < Duration::from_secs(8));
}

/// The runner enforces its time limit (and cancellation) by dropping the tool's future; the whole
/// process group must die then too, not only the direct child.
#[tokio::test]
async fn dropping_a_running_call_kills_the_whole_process_group() {
    let skill = tempfile::tempdir().unwrap();
    let pidfile = skill.path().join("bg.pid");
    write_script(
        skill.path(),
        "spawner.sh",
        &format!("sleep 30 &\necho $! > {}\nwait\n", pidfile.display()),
    );
    let path_var = std::env::var("PATH").unwrap();
    let ScriptLookup::Found {
        script,
        interpreter,
    } = find_script(skill.path(), "spawner", &path_var)
    else {
        panic!("script not found")
    };
    let tool = ScriptTool {
        name: "spawner".into(),
        skill: "demo".into(),
        description: "d".into(),
        script,
        interpreter,
        env_passthrough: vec![],
        proxy_url: None,
        confine: None,
        timeout: Duration::from_secs(60),
    };
    let c = ctx(skill.path());
    // Like the runner's time limit: the call's future is dropped.
    let r = tokio::time::timeout(Duration::from_secs(1), tool.execute(&c, json!({}))).await;
    assert!(r.is_err(), "the script waits, so the call is still running");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                let state = s.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z')
            })
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while alive(pid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let still = alive(pid);
    if still {
        // SAFETY: plain kill(2) of the stray test process.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    assert!(
        !still,
        "the background process {pid} outlived the dropped call"
    );
}

/// A `## Tool:` section name is text from a SKILL.md: it names a file in the skill's `scripts`
/// dir and can never reach a script outside it (`../`), which discovery's symlink check would
/// never have seen.
#[test]
fn script_lookup_never_leaves_the_scripts_dir() {
    let root = tempfile::tempdir().unwrap();
    let skill = root.path().join("skills/demo");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(root.path().join("outside.sh"), "echo pwned\n").unwrap();
    std::fs::create_dir_all(root.path().join("skills/demo/scripts/sub")).unwrap();
    std::fs::write(skill.join("scripts/sub/inner.sh"), "echo inner\n").unwrap();
    let path_var = std::env::var("PATH").unwrap();
    for name in [
        "../../../outside",
        "../../../../outside",
        "sub/inner",
        "/etc/passwd",
        "..",
        "a\\..\\b",
    ] {
        let found = find_script(&skill, name, &path_var);
        assert!(
            matches!(found, ScriptLookup::NoScript { .. }),
            "{name:?}: {found:?}"
        );
    }
}

fn write_script(dir: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts").join(name), body).unwrap();
}

#[tokio::test]
async fn script_tools_get_json_args_skill_env_and_proxy_env() {
    let skill = tempfile::tempdir().unwrap();
    write_script(
        skill.path(),
        "look-up.sh",
        "#!/bin/sh\nprintf '{\"arg\":%s,\"proxy\":\"%s\",\"cargo\":\"%s\"}' \"$1\" \"$HTTPS_PROXY\" \"${CARGO_MANIFEST_DIR:-unset}\"\n",
    );
    let path_var = std::env::var("PATH").unwrap();
    // `look_up` finds `look-up.sh` (underscores may be dashes on disk).
    let ScriptLookup::Found {
        script,
        interpreter,
    } = find_script(skill.path(), "look_up", &path_var)
    else {
        panic!("script not found")
    };
    let tool = ScriptTool {
        name: "look_up".into(),
        skill: "demo".into(),
        description: "d".into(),
        script,
        interpreter,
        env_passthrough: vec![],
        proxy_url: Some("http://127.0.0.1:1234".into()),
        confine: None,
        timeout: Duration::from_secs(20),
    };
    let out = tool
        .execute(&ctx(skill.path()), json!({"q": "it's \"quoted\""}))
        .await
        .unwrap();
    let data: Value = out.data.expect("script printed JSON");
    assert_eq!(data["arg"], json!({"q": "it's \"quoted\""}));
    assert_eq!(data["proxy"], "http://127.0.0.1:1234");
    assert_eq!(data["cargo"], "unset");

    // A failing script is a tool error carrying its stderr.
    write_script(skill.path(), "fails.sh", "echo 'bad input' >&2\nexit 3\n");
    let ScriptLookup::Found {
        script,
        interpreter,
    } = find_script(skill.path(), "fails", &path_var)
    else {
        panic!("script not found")
    };
    let tool = ScriptTool {
        name: "fails".into(),
        script,
        interpreter,
        ..tool
    };
    let err = tool
        .execute(&ctx(skill.path()), json!({}))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("exited with code 3:"), "{msg}");
    // stderr is the program's output like stdout (it can carry fetched content): fenced.
    let start = msg.find("<<<UNTRUSTED_CONTENT_START id=").expect(&msg);
    let bad = msg.find("bad input").expect(&msg);
    let end = msg.find("<<<UNTRUSTED_CONTENT_END id=").expect(&msg);
    assert!(start < bad && bad < end, "{msg}");

    // Missing script and missing interpreter are reported, not guessed.
    assert!(
        matches!(find_script(skill.path(), "nothing", &path_var), ScriptLookup::NoScript { tried } if tried.len() == 3)
    );
    write_script(skill.path(), "js_tool.js", "console.log(1)");
    assert!(matches!(
        find_script(skill.path(), "js_tool", "/nonexistent-dir"),
        ScriptLookup::NoInterpreter { .. }
    ));
}

#[test]
fn builtins_are_the_documented_six() {
    let names: Vec<String> = forge_tools::builtins::always()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(names, forge_tools::builtins::ALWAYS);
}
