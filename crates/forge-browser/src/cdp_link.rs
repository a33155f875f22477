//! forge's second CDP connection to the browser ([`CdpLink`]), used to send commands on the
//! sessions of iframe targets, which chromiumoxide 0.9 cannot address through a `Page` (see
//! `frames.rs` for why forge needs it). The link is opened once per running browser (kept in
//! `Running::frame_link`) and both the manager and `frames.rs` name it from here.

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::target::{AttachToTargetParams, SessionId, TargetId};
use chromiumoxide::error::CdpError;
use chromiumoxide::types::{CallId, CdpJsonEventMessage, Message, MethodId};
use chromiumoxide::{Command, Connection};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::observe::PageError;

/// Time limit for one command on the frame link.
const LINK_LIMIT: Duration = Duration::from_secs(10);

struct LinkCmd {
    method: MethodId,
    session: Option<SessionId>,
    params: Value,
    reply: oneshot::Sender<Result<Value, String>>,
}

/// forge's second CDP connection to the browser, for commands on iframe targets' sessions.
pub(crate) struct CdpLink {
    tx: mpsc::UnboundedSender<LinkCmd>,
    /// Target id -> the session forge attached to it on this link.
    sessions: StdMutex<HashMap<String, SessionId>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CdpLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CdpLink {
    /// Connect to the browser's DevTools socket `ws` (a loopback address Chromium printed).
    pub(crate) async fn connect(ws: &str) -> Result<CdpLink, PageError> {
        let conn = Connection::<CdpJsonEventMessage>::connect(ws)
            .await
            .map_err(|e| {
                PageError::Cdp(format!(
                    "cannot open forge's frame connection to Chromium at {ws}: {e}"
                ))
            })?;
        // Nagle off, as on the main connection (`nodelay.rs`).
        if let Some(peer) = crate::nodelay::ws_peer(ws) {
            crate::nodelay::on_connections_to(peer);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(drive(conn, rx));
        Ok(CdpLink {
            tx,
            sessions: StdMutex::new(HashMap::new()),
            task,
        })
    }

    /// Run `cmd` on `session` (None: the browser).
    pub(crate) async fn exec<C: Command>(
        &self,
        session: Option<&SessionId>,
        cmd: C,
    ) -> Result<C::Response, PageError> {
        self.exec_within(session, cmd, LINK_LIMIT).await
    }

    /// [`Self::exec`] with its own time limit.
    pub(crate) async fn exec_within<C: Command>(
        &self,
        session: Option<&SessionId>,
        cmd: C,
        limit: Duration,
    ) -> Result<C::Response, PageError> {
        let method = cmd.identifier();
        let params = serde_json::to_value(&cmd)
            .map_err(|e| PageError::Cdp(format!("cannot encode {method}: {e}")))?;
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(LinkCmd {
                method: method.clone(),
                session: session.cloned(),
                params,
                reply,
            })
            .map_err(|_| PageError::Cdp("forge's frame connection to Chromium is closed".into()))?;
        let v = match tokio::time::timeout(limit, rx).await {
            Ok(Ok(Ok(v))) => v,
            Ok(Ok(Err(e))) => return Err(PageError::Cdp(format!("{method}: {e}"))),
            Ok(Err(_)) => {
                return Err(PageError::Cdp(
                    "forge's frame connection to Chromium closed".into(),
                ))
            }
            Err(_) => {
                return Err(PageError::Cdp(format!(
                    "{method}: no answer within {limit:?}"
                )))
            }
        };
        serde_json::from_value(v)
            .map_err(|e| PageError::Cdp(format!("unexpected answer to {method}: {e}")))
    }

    /// The session on iframe target `target`, attaching (flattened) when there is none.
    pub(crate) async fn session_for(&self, target: &TargetId) -> Result<SessionId, PageError> {
        if let Some(s) = self.cached(target) {
            return Ok(s);
        }
        let attached = self
            .exec(
                None,
                AttachToTargetParams::builder()
                    .target_id(target.clone())
                    .flatten(true)
                    .build()
                    .map_err(PageError::Cdp)?,
            )
            .await?;
        let mut map = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        // Bounded: frames come and go; a session of a frame that is gone is just dropped here
        // (Chromium detaches it when the target goes).
        if map.len() >= 64 {
            map.clear();
        }
        map.insert(target.inner().clone(), attached.session_id.clone());
        Ok(attached.session_id)
    }

    fn cached(&self, target: &TargetId) -> Option<SessionId> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(target.inner())
            .cloned()
    }

    pub(crate) fn forget(&self, target: &TargetId) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(target.inner());
    }
}

/// Pump the link: send queued commands, hand answers to their callers; events are ignored.
async fn drive(
    mut conn: Connection<CdpJsonEventMessage>,
    mut rx: mpsc::UnboundedReceiver<LinkCmd>,
) {
    let mut pending: HashMap<CallId, oneshot::Sender<Result<Value, String>>> = HashMap::new();
    loop {
        tokio::select! {
            cmd = rx.recv() => {
                let Some(c) = cmd else { break };
                match conn.submit_command(c.method, c.session, c.params) {
                    Ok(id) => {
                        // Callers that gave up (time limit) leave closed senders behind.
                        pending.retain(|_, tx| !tx.is_closed());
                        pending.insert(id, c.reply);
                    }
                    Err(e) => {
                        let _ = c.reply.send(Err(e.to_string()));
                    }
                }
            }
            msg = conn.next() => match msg {
                Some(Ok(Message::Response(r))) => {
                    if let Some(tx) = pending.remove(&r.id) {
                        let answer = match (r.result, r.error) {
                            (Some(v), _) => Ok(v),
                            (None, Some(e)) => Err(e.message),
                            (None, None) => Err("empty answer".to_string()),
                        };
                        let _ = tx.send(answer);
                    }
                }
                Some(Ok(Message::Event(_))) => {}
                Some(Err(CdpError::Ws(_))) | None => break,
                // A message that does not parse: skip it.
                Some(Err(_)) => {}
            }
        }
    }
}
