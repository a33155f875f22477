//! A stdio MCP server as a confined child process.
//!
//! Invariants (each tested in tests/client_stdio.rs or below):
//! - The child's environment is cleared; it gets only the `(name, value)` pairs the caller passes
//!   (the server's listed `env` names and the proxy variables, see [`stdio_env`]).
//! - It runs in its own process group; dropping [`ChildGuard`] (or [`ChildGuard::kill`]) sends
//!   SIGKILL to the whole group, so helpers it started die with it.
//! - With a confiner it runs in a network namespace of its own whose only reachable address is the
//!   egress proxy (forge-egress `confine`).
//! - Its stderr goes to the tracing log (target `forge_mcp::stderr`, one event per line, lines
//!   capped), never to the model or to forge's stdout.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Longest stderr line logged (longer lines are cut).
const MAX_STDERR_LINE: usize = 2000;

/// The environment of a stdio server: each name in `names` whose value `lookup` finds, plus
/// `HTTP_PROXY`/`HTTPS_PROXY` (and lowercase forms) set to `proxy` when given.
pub fn stdio_env(
    names: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    proxy: Option<&str>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = names
        .iter()
        .filter_map(|n| lookup(n).map(|v| (n.clone(), v)))
        .collect();
    if let Some(p) = proxy {
        for n in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            out.retain(|(k, _)| k != n);
            out.push((n.to_string(), p.to_string()));
        }
    }
    out
}

/// The running child; kills its process group when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    pgid: Option<i32>,
    server: String,
    /// When confined: keeps the proxy serving the child's 127.0.0.1:3128 while it lives.
    _confined: Option<forge_egress::confine::ConfinedChild>,
}

impl ChildGuard {
    /// The child's process id (also its process group id).
    pub fn id(&self) -> Option<u32> {
        self.pgid.map(|p| p as u32)
    }

    /// Kill the process group and reap the child.
    pub async fn kill(mut self) {
        self.kill_group();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait()).await;
    }

    fn kill_group(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg has no memory-safety preconditions; pgid is the group this guard's
            // child leads (it was spawned with process_group(0)).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
            tracing::debug!(server = %self.server, pgid, "killed stdio MCP server process group");
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Spawn `command args` with exactly `env`, in a new process group, stdin/stdout piped for MCP,
/// stderr forwarded to the log. `server` names it in log lines. With `confine`, the child runs in
/// a network namespace of its own whose only reachable address is the proxy (127.0.0.1:3128 there;
/// `env`'s proxy variables should say so: [`forge_egress::confine::CHILD_PROXY_URL`]).
pub fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: Option<&std::path::Path>,
    confine: Option<&forge_egress::confine::Confiner>,
) -> std::io::Result<(ChildGuard, ChildStdout, ChildStdin)> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let pending = match confine {
        Some(c) => Some(
            c.prepare(cmd.as_std_mut(), &forge_egress::confine::Plan::proxy_only())
                .map_err(std::io::Error::other)?,
        ),
        None => None,
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Err(match pending {
                Some(p) => std::io::Error::other(p.failure(e)),
                None => e,
            })
        }
    };
    let confined = match pending.map(|p| p.attach()).transpose() {
        Ok(c) => c,
        Err(e) => {
            let _ = child.start_kill();
            return Err(std::io::Error::other(e));
        }
    };
    let pgid = child.id().map(|p| p as i32);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(std::io::Error::other(
            "the child's stdin/stdout were not piped",
        ));
    };
    if let Some(stderr) = child.stderr.take() {
        let name = server.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            // Bounded by the child's lifetime: the pipe closes when the process group dies.
            while let Ok(Some(mut line)) = lines.next_line().await {
                if line.len() > MAX_STDERR_LINE {
                    let mut cut = MAX_STDERR_LINE;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                    line.push_str(" [...]");
                }
                tracing::info!(target: "forge_mcp::stderr", server = %name, "{line}");
            }
        });
    }
    Ok((
        ChildGuard {
            child,
            pgid,
            server: server.to_string(),
            _confined: confined,
        },
        stdout,
        stdin,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_is_only_the_listed_names_and_the_proxy() {
        let lookup = |k: &str| match k {
            "A" => Some("1".to_string()),
            "HTTP_PROXY" => Some("http://evil".to_string()),
            _ => None,
        };
        let env = stdio_env(
            &["A".into(), "MISSING".into(), "HTTP_PROXY".into()],
            &lookup,
            Some("http://127.0.0.1:9"),
        );
        assert!(env.contains(&("A".into(), "1".into())));
        assert!(!env.iter().any(|(k, _)| k == "MISSING"));
        let proxies: Vec<_> = env.iter().filter(|(k, _)| k == "HTTP_PROXY").collect();
        assert_eq!(
            proxies,
            [&("HTTP_PROXY".to_string(), "http://127.0.0.1:9".to_string())]
        );
        assert_eq!(env.len(), 5);
    }
}
