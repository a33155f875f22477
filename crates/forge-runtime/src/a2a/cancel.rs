//! Cancelling tasks: `tasks/cancel` on this replica, on another replica of a fleet (a flag in
//! the state store that the replica running the task polls), and cancelling every task at
//! shutdown.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::store::{lock, TaskStore};
use super::wire::RpcError;

/// How long `tasks/cancel` waits for the task to stop before answering.
pub(crate) const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// How often a running task checks the store for a cancel asked on another replica.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(500);

impl TaskStore {
    /// Cancel a running task and wait (up to [`CANCEL_WAIT`]) for it to stop; returns the task.
    pub async fn cancel(&self, id: &str) -> Result<Value, RpcError> {
        let known_here = lock(&self.inner).tasks.contains_key(id);
        if !known_here {
            return self.cancel_elsewhere(id).await;
        }
        let (token, done) = {
            let inner = lock(&self.inner);
            let e = inner
                .tasks
                .get(id)
                .ok_or_else(|| RpcError::task_not_found(id))?;
            if e.state.is_final() {
                return Err(RpcError {
                    code: -32002,
                    message: format!(
                        "Task cannot be canceled: it is already {}",
                        e.state.as_str()
                    ),
                });
            }
            (e.cancel.clone(), e.done.clone())
        };
        token.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, self.wait(done)).await;
        self.get(id, None)
    }

    /// While task `id` runs, poll the state store's cancel flag (set by `tasks/cancel` on another
    /// replica) every [`CANCEL_POLL`] and cancel the task when it is set. Ends with the task.
    pub(super) async fn watch_cancel_flag(&self, id: &str, cancel: &CancellationToken) {
        let Some(d) = self
            .durable
            .as_ref()
            .filter(|d| d.store.kind() == "postgres")
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(CANCEL_POLL) => {}
            }
            let finished = lock(&self.inner)
                .tasks
                .get(id)
                .is_none_or(|e| e.state.is_final());
            if finished {
                return;
            }
            if d.store.cancel_requested(id).await.unwrap_or(false) {
                cancel.cancel();
                return;
            }
        }
    }

    /// `tasks/cancel` for a task this replica does not run: set the store's cancel flag for the
    /// replica that runs it and wait (up to [`CANCEL_WAIT`]) until the store shows it ended.
    pub(super) async fn cancel_elsewhere(&self, id: &str) -> Result<Value, RpcError> {
        let Some(d) = &self.durable else {
            return Err(RpcError::task_not_found(id));
        };
        let internal = |e: forge_state::StateError| RpcError {
            code: -32603,
            message: format!("Internal error: {e}"),
        };
        let Some(t) = d.store.task(id).await.map_err(internal)? else {
            return Err(RpcError::task_not_found(id));
        };
        if t.is_final() {
            return Err(RpcError {
                code: -32002,
                message: format!("Task cannot be canceled: it is already {}", t.state),
            });
        }
        d.store.request_cancel(id).await.map_err(internal)?;
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        // Bounded by the deadline: one store read per 200 ms.
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(t)) = d.store.task(id).await {
                if t.is_final() {
                    return Ok(t.task);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.get_or_load(id, None).await
    }

    /// Cancel every running task (server shutdown).
    pub fn cancel_all(&self) {
        let inner = lock(&self.inner);
        for e in inner.tasks.values() {
            e.cancel.cancel();
        }
    }
}
