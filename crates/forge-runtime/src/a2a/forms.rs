//! The form skills as A2A tasks: a message whose `metadata.skill` (or `skillId`) names
//! `learn-form-schema` or `execute-form-batch` runs [`crate::forms`] instead of the agent loop.
//! Its input and `allowedHosts` are checked before the task exists (an invalid-params error,
//! as for `metadata.forge`); a batch streams one status update per row (`row 17/50 done`, with
//! the row in `metadata.forge`); the task ends with the schema (learn: the answer is the
//! FormSchema JSON, also `form-schema.json`) or the results (`form-results.json`,
//! `form-results.csv`).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::store::TaskStore;
use super::wire::{agent_message, RpcError};
use crate::agent_loop::{AgentLoop, LoopError, TaskOutcome, TaskRun};
use crate::audit::rfc3339_now;
use crate::forms::{FormEnv, FormRequest};
use crate::task_scope::{ResultStatus, TaskResult};

/// The form request of `message`, checked (input and scope), or None for the generalist.
pub(super) fn form_request(
    agent: &AgentLoop,
    message: &Value,
) -> Result<Option<FormRequest>, RpcError> {
    let req = FormRequest::from_a2a_message(message)
        .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    if let Some(r) = &req {
        crate::forms::narrowed(agent.policy(), &agent.config.tasks, r.allowed_hosts())
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        if agent
            .sessions
            .as_ref()
            .and_then(|s| s.form_tool(forge_browser::forms::LEARN_TOOL))
            .is_none()
        {
            return Err(RpcError::invalid_params(
                crate::forms::FormError::NoBrowser.to_string(),
            ));
        }
    }
    Ok(req)
}

impl TaskStore {
    fn form_env(&self) -> FormEnv {
        FormEnv::of_agent(
            &self.agent,
            self.durable.as_ref().map(|d| d.store.clone()),
            self.durable
                .as_ref()
                .map(|d| d.replica.clone())
                .unwrap_or_else(|| "local".into()),
        )
    }

    /// A status update of task `id` saying `text`, with `data` under `metadata.forge`.
    fn form_progress(&self, id: &str, context_id: &str, text: String, data: Value) {
        let msg = agent_message(
            id,
            context_id,
            vec![
                json!({"kind": "text", "text": text}),
                json!({"kind": "data", "data": data.clone()}),
            ],
        );
        self.publish(id, |e| {
            if e.state.is_final() {
                return vec![];
            }
            e.status_message = Some(msg.clone());
            e.status_time = rfc3339_now();
            let mut ev = Self::status_event(id, e, false);
            ev["metadata"] = json!({"forge": data});
            vec![ev]
        });
    }

    /// Run form request `req` as task `id`.
    pub(super) async fn run_form(
        self: &Arc<Self>,
        id: &str,
        context_id: &str,
        req: &FormRequest,
        cancel: &CancellationToken,
    ) -> TaskRun {
        let started = std::time::Instant::now();
        let env = self.form_env();
        let dir = self
            .agent
            .files_dir
            .join(crate::workspace::workspace_id(&format!("{id}-form")));
        crate::workspace::prepare(&dir);
        let write = |name: &str, body: &str| -> Option<PathBuf> {
            let p = dir.join(name);
            std::fs::write(&p, body).ok().map(|()| p)
        };
        let outcome: Result<(String, String, Vec<PathBuf>), LoopError> = match req {
            FormRequest::Learn(l) => match env.learn(id, l).await {
                Ok((schema, kept)) => {
                    let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
                    let summary = format!(
                        "learned form {} on {} ({} fields, fingerprint {}){}",
                        schema.slug,
                        schema.host,
                        schema.fields.len(),
                        schema.fingerprint,
                        if kept {
                            format!("; kept as sites/{}/forms/{}", schema.host, schema.slug)
                        } else {
                            String::new()
                        }
                    );
                    Ok((
                        text.clone(),
                        summary,
                        write("form-schema.json", &text).into_iter().collect(),
                    ))
                }
                Err(e) => Err(LoopError::Form(e.to_string())),
            },
            FormRequest::Batch(b) => {
                let me = self.clone();
                let (tid, cid) = (id.to_string(), context_id.to_string());
                let progress = move |r: &crate::forms::RowResult, n: usize, total: usize| {
                    let text = format!("row {n}/{total} {}", r.status);
                    let data = json!({"event": "form_row", "row": r.index, "position": n, "total": total, "status": r.status, "message": r.message});
                    me.form_progress(&tid, &cid, text, data);
                };
                match env.run_batch(id, b, cancel, &progress).await {
                    Ok(result) => {
                        let json_text =
                            serde_json::to_string_pretty(&result.to_json()).unwrap_or_default();
                        let files: Vec<PathBuf> = [
                            write("form-results.json", &json_text),
                            write("form-results.csv", &result.to_csv()),
                        ]
                        .into_iter()
                        .flatten()
                        .collect();
                        match &result.stopped {
                            Some(why) if !cancel.is_cancelled() => Err(LoopError::Form(format!(
                                "the batch stopped: {why} ({})",
                                result.summary()
                            ))),
                            _ if cancel.is_cancelled() => Err(LoopError::Cancelled),
                            _ => Ok((result.summary(), result.summary(), files)),
                        }
                    }
                    Err(e) => Err(LoopError::Form(e.to_string())),
                }
            }
        };
        let seconds = started.elapsed().as_millis() as f64 / 1000.0;
        let (status, answer) = match &outcome {
            Ok((_, summary, _)) => (ResultStatus::Done, summary.clone()),
            Err(LoopError::Cancelled) => (ResultStatus::Canceled, "The task was cancelled.".into()),
            Err(e) => (ResultStatus::Failed, e.to_string()),
        };
        let result = TaskResult {
            status,
            answer,
            steps: 0,
            seconds,
            navigations: vec![],
            blocked: vec![],
            artifacts: vec![],
        };
        TaskRun {
            outcome: outcome.map(|(answer, _, artifacts)| TaskOutcome {
                answer,
                iterations: 0,
                artifacts,
                messages: vec![],
                steps: 0,
                incomplete: None,
            }),
            result,
        }
    }
}
