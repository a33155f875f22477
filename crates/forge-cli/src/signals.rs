//! Waiting for the signal that stops a long-running command (`forge run`, `forge mcp serve`,
//! `forge egress proxy`): Ctrl-C (SIGINT) or SIGTERM (what a container runtime sends).

/// Return when Ctrl-C or SIGTERM arrives (only Ctrl-C where SIGTERM cannot be listened for).
pub(crate) async fn wait_for_shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
