//! The watch page's memory of each task: every audit event written with a task id (after the
//! audit scrubber, with its `seq` and hashes), plus what the page shows but the audit file does
//! not keep (tool arguments, the model's thoughts; scrubbed the same way). Bounded: the most
//! recent [`MAX_TASKS`] tasks, [`MAX_EVENTS`] events and [`MAX_TASK_BYTES`] of JSON each (later
//! ones are counted, not kept).
//! It also tells the page's event streams which task changed, and holds their slots.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{broadcast, Semaphore};

/// Tasks whose events are remembered (the A2A store lists more; older ones show no timeline).
pub(crate) const MAX_TASKS: usize = 200;
/// Events kept per task; past it they are counted in `dropped`.
pub(crate) const MAX_EVENTS: usize = 2000;
/// Bytes of event JSON kept per task; past it events are counted in `dropped`.
pub(crate) const MAX_TASK_BYTES: usize = 512 * 1024;
/// Watch-page event streams open at once (each holds one of the server's connection slots).
pub(crate) const MAX_WATCHERS: usize = 16;

/// One task's recorded events.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskEvents {
    /// The events, oldest first.
    pub events: Vec<Value>,
    /// Events not kept because the task had [`MAX_EVENTS`] or [`MAX_TASK_BYTES`] already.
    pub dropped: u64,
    /// Bytes of JSON kept.
    bytes: usize,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, TaskEvents>,
    order: VecDeque<String>,
}

/// See the module comment.
pub(crate) struct Tap {
    inner: Mutex<Inner>,
    changed: broadcast::Sender<String>,
    /// Slots of open event streams.
    pub watchers: Arc<Semaphore>,
}

impl Default for Tap {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            changed: broadcast::channel(256).0,
            watchers: Arc::new(Semaphore::new(MAX_WATCHERS)),
        }
    }
}

impl Tap {
    /// Keep `event` for `task_id` and tell the watchers.
    pub(crate) fn record(&self, task_id: &str, event: &Value) {
        {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !inner.tasks.contains_key(task_id) {
                inner.order.push_back(task_id.to_string());
                while inner.order.len() > MAX_TASKS {
                    if let Some(old) = inner.order.pop_front() {
                        inner.tasks.remove(&old);
                    }
                }
            }
            let size = event.to_string().len();
            let t = inner.tasks.entry(task_id.to_string()).or_default();
            if t.events.len() < MAX_EVENTS && t.bytes + size <= MAX_TASK_BYTES {
                t.events.push(event.clone());
                t.bytes += size;
            } else {
                t.dropped += 1;
            }
        }
        self.changed(task_id);
    }

    /// Tell the watchers that `task_id` changed (its state, for one).
    pub(crate) fn changed(&self, task_id: &str) {
        // No receiver (nobody watching) is the common case, not an error.
        let _ = self.changed.send(task_id.to_string());
    }

    /// A receiver of changed task ids.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changed.subscribe()
    }

    /// The events of `task_id`.
    pub(crate) fn events(&self, task_id: &str) -> Option<TaskEvents> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tasks.get(task_id).cloned()
    }

    /// The ids of the tasks remembered, most recent first.
    pub(crate) fn task_ids(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.order.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_at_most_max_events_per_task_and_counts_the_rest() {
        let tap = Tap::default();
        for i in 0..(MAX_EVENTS + 5) {
            tap.record("t1", &json!({"i": i}));
        }
        let t = tap.events("t1").expect("recorded");
        assert_eq!(t.events.len(), MAX_EVENTS);
        assert_eq!(t.dropped, 5);
        assert_eq!(t.events[0]["i"], 0);
    }

    #[test]
    fn keeps_at_most_max_task_bytes_per_task() {
        let tap = Tap::default();
        let big = "x".repeat(100 * 1024);
        for _ in 0..10 {
            tap.record("t1", &json!({"text": big}));
        }
        let t = tap.events("t1").expect("recorded");
        assert_eq!(t.events.len(), 5, "5 x 100 KiB fit in 512 KiB");
        assert_eq!(t.dropped, 5);
    }

    #[test]
    fn forgets_the_oldest_task_past_max_tasks() {
        let tap = Tap::default();
        for i in 0..=MAX_TASKS {
            tap.record(&format!("t{i}"), &json!({}));
        }
        assert!(tap.events("t0").is_none());
        assert!(tap.events(&format!("t{MAX_TASKS}")).is_some());
        assert_eq!(tap.task_ids().len(), MAX_TASKS);
    }
}
