//! Running a child process for a tool (cli_execute, skill scripts): no shell, a cleared environment
//! with only what the caller lists, its own process group (so a timeout or cancellation kills the
//! whole tree), stdout and stderr captured up to a byte cap, and a time limit.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::tool::ToolError;

/// Environment variables a child always gets from forge's own environment when set (none of them
/// carries a secret).
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "TERM",
];

/// Proxy variables forge sets for every child when it has an egress proxy; set last so a skill's
/// passthrough cannot override them. `NO_PROXY` is set empty so nothing bypasses the proxy.
pub fn proxy_env(proxy_url: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        v.push((k.to_string(), proxy_url.to_string()));
    }
    v.push(("NO_PROXY".into(), String::new()));
    v.push(("no_proxy".into(), String::new()));
    v
}

/// The proxy variables of a child: the namespace's own proxy address when it is confined, else
/// forge's proxy URL (none without a proxy).
pub fn child_proxy_env(
    confine: Option<&forge_egress::confine::Confiner>,
    proxy_url: Option<&str>,
) -> Vec<(String, String)> {
    match (confine, proxy_url) {
        (Some(_), _) => proxy_env(forge_egress::confine::CHILD_PROXY_URL),
        (None, Some(u)) => proxy_env(u),
        (None, None) => Vec::new(),
    }
}

/// Build a child environment: [`BASE_ENV`] and `passthrough` names taken from forge's environment
/// when set, then `extra` (e.g. the proxy variables) which wins.
pub fn child_env(passthrough: &[String], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| {
        env.retain(|(ek, _)| ek != k);
        env.push((k.to_string(), v));
    };
    for k in BASE_ENV
        .iter()
        .copied()
        .chain(passthrough.iter().map(String::as_str))
    {
        if let Ok(v) = std::env::var(k) {
            put(k, v);
        }
    }
    for (k, v) in extra {
        put(k, v.clone());
    }
    env
}

/// The working directory of a child run for a call: the call's workspace (`ctx.files_dir`),
/// created when missing, so programs see and write only that workspace's files by default.
pub fn workspace_cwd(files_dir: &std::path::Path) -> Result<PathBuf, crate::tool::ToolError> {
    std::fs::create_dir_all(files_dir).map_err(|e| {
        crate::tool::ToolError::Failed(format!(
            "could not create the workspace directory {}: {e}",
            files_dir.display()
        ))
    })?;
    Ok(files_dir.to_path_buf())
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Absolute path of the program (resolved at startup, never looked up by a shell).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The complete environment of the child (it inherits nothing else).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Cap for stdout and for stderr, each.
    pub max_output_bytes: usize,
    /// Run the child in a network namespace whose only reachable address is the egress proxy
    /// (127.0.0.1:3128 there); `None`: proxy variables only.
    pub confine: Option<forge_egress::confine::Confiner>,
}

/// What a finished child produced; serialises to `{stdout, stderr, exit_code, truncated}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub stdout: String,
    pub stderr: String,
    /// The exit status; 128+N when killed by signal N (the shell convention).
    pub exit_code: i32,
    /// True when stdout or stderr was cut at the cap.
    pub truncated: bool,
}

/// How long to keep reading output after the child exited (for grandchildren holding the pipes),
/// before the group is killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// After the group was killed, how long the readers get to see EOF before they stop: a process that
/// left the group (`setsid`) can hold the pipes open indefinitely.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);

/// Run `spec`, honouring its timeout and `cancel`.
pub async fn run(spec: &RunSpec, cancel: &CancellationToken) -> Result<RunResult, ToolError> {
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let pending = match &spec.confine {
        Some(c) => Some(
            c.prepare(cmd.as_std_mut(), &forge_egress::confine::Plan::proxy_only())
                .map_err(|e| {
                    ToolError::Failed(format!("could not start {}: {e}", spec.program.display()))
                })?,
        ),
        None => None,
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = match pending {
                Some(p) => p.failure(e).to_string(),
                None => e.to_string(),
            };
            return Err(ToolError::Failed(format!(
                "could not start {}: {why}",
                spec.program.display()
            )));
        }
    };
    // While this lives, the proxy serves the child's 127.0.0.1:3128 (inside its namespace).
    let _confined = match pending.map(|p| p.attach()).transpose() {
        Ok(c) => c,
        Err(e) => {
            let _ = child.start_kill();
            return Err(ToolError::Failed(format!(
                "could not confine {}: {e}",
                spec.program.display()
            )));
        }
    };
    let stop_reading = CancellationToken::new();
    // Kills the group when the call ends in any way, including the caller dropping this future
    // (the tool runner's time limit and cancellation do that): `kill_on_drop` alone would reach
    // only the direct child.
    let group = GroupGuard {
        pgid: child.id().map(|p| p as i32),
        stop_reading: stop_reading.clone(),
    };
    let kill_group = || group.kill();

    if let (Some(input), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
    }
    let cap = spec.max_output_bytes;
    let out_task = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap, stop_reading.clone())));
    let err_task = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap, stop_reading.clone())));

    let status = tokio::select! {
        st = child.wait() => st.map_err(|e| ToolError::Failed(format!("waiting for {}: {e}", spec.program.display())))?,
        _ = tokio::time::sleep(spec.timeout) => {
            kill_group();
            stop_reading.cancel();
            let _ = child.wait().await;
            return Err(ToolError::Timeout(spec.timeout));
        }
        _ = cancel.cancelled() => {
            kill_group();
            stop_reading.cancel();
            let _ = child.wait().await;
            return Err(ToolError::Cancelled);
        }
    };

    let collect = |t: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>| async move {
        match t {
            Some(t) => t.await.unwrap_or_default(),
            None => (Vec::new(), false),
        }
    };
    let both = async { (collect(out_task).await, collect(err_task).await) };
    tokio::pin!(both);
    let ((out, out_trunc), (err, err_trunc)) = tokio::select! {
        r = &mut both => r,
        _ = tokio::time::sleep(DRAIN_GRACE) => {
            // A grandchild still holds the pipes: end the group so the readers see EOF.
            kill_group();
            tokio::select! {
                r = &mut both => r,
                _ = tokio::time::sleep(DRAIN_AFTER_KILL) => {
                    // Something outside the group still holds them: keep what was read, stop.
                    stop_reading.cancel();
                    both.await
                }
            }
        }
    };
    // Nothing the call started outlives it.
    kill_group();

    #[cfg(unix)]
    let code = {
        use std::os::unix::process::ExitStatusExt;
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    };
    #[cfg(not(unix))]
    let code = status.code().unwrap_or(-1);
    Ok(RunResult {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        exit_code: code,
        truncated: out_trunc || err_trunc,
    })
}

/// The child's process group, killed (and its output readers stopped) when dropped.
struct GroupGuard {
    pgid: Option<i32>,
    stop_reading: CancellationToken,
}

impl GroupGuard {
    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pg) = self.pgid {
            // SAFETY: killpg has no memory-safety preconditions; a stale group id yields ESRCH.
            unsafe {
                libc::killpg(pg, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        self.stop_reading.cancel();
    }
}

/// Read everything from `r` (until EOF or `stop`), keeping the first `cap` bytes; returns them and
/// whether more came.
async fn read_capped<R: AsyncRead + Unpin>(
    mut r: R,
    cap: usize,
    stop: CancellationToken,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            // Stop first, so that a writer that never pauses cannot keep the reader going.
            biased;
            _ = stop.cancelled() => break,
            r = r.read(&mut buf) => r,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

/// Find `name` on `path_var` (a `PATH`-style list): the first existing executable regular file.
/// Only a bare name is looked up, and only in absolute directories (a relative entry would
/// depend on the tool's working directory).
pub fn which_in(name: &str, path_var: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    forge_which::find_in(
        name,
        std::env::split_paths(path_var).filter(|d| d.is_absolute()),
    )
}

/// Whether `p` is a regular file with an execute bit (forge-which's one copy).
pub use forge_which::is_executable;
