//! The bridge between the agent loop and the runner's assembled tools
//! ([`crate::assemble::AssembledTools`]): every tool call goes through the one call path
//! (guardrails, time limit, cancellation, fence); prompt and response guardrails apply to the user
//! message and the final answer; guardrail hits and egress proxy decisions become audit events;
//! a task's browser session is closed at the end of the task.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use forge_egress::proxy::{Decision, EgressObserver, Outcome, ProxyHandle};
use forge_egress::EgressPolicy;
use forge_tools::{ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{LoopTools, SessionCloser};
use crate::assemble::{AssembledTools, CallEvent, GuardrailEvent, ToolEvents, ToolRunner};
use crate::audit::{events, AuditLog, Field};
use crate::guardrails::Guardrails;
use crate::profiles::{LoadedProfile, Profiles};
use crate::task_scope::NavigationRecord;
use forge_llm::ToolSpec;

/// [`LoopTools`] over the assembled tool set.
pub(crate) struct AssembledLoopTools {
    runner: ToolRunner,
    guardrails: Arc<Guardrails>,
}

impl AssembledLoopTools {
    /// The loop's view of `tools` (the loop audits prompt/response guardrail hits itself).
    pub(crate) fn new(tools: &AssembledTools) -> Self {
        Self {
            runner: tools.runner(),
            guardrails: tools.guardrails().clone(),
        }
    }
}

#[async_trait]
impl LoopTools for AssembledLoopTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.runner.specs()
    }

    async fn run(
        &self,
        ctx: &ToolContext,
        name: &str,
        input: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.runner.execute(name, input, ctx).await
    }

    fn check_prompt(&self, prompt: &str) -> Result<(), String> {
        self.guardrails
            .check_prompt(prompt)
            .map_err(|h| h.to_string())
    }

    fn check_response(&self, response: &str) -> Result<String, String> {
        self.guardrails
            .check_response(response)
            .map(|()| response.to_string())
            .map_err(|h| h.to_string())
    }
}

/// Writes `guardrail_check` audit events for tool guardrail hits.
pub(crate) struct AuditToolEvents(pub AuditLog);

impl ToolEvents for AuditToolEvents {
    fn on_guardrail(&self, ev: &GuardrailEvent) {
        let mut fields = json!({
            "stage": ev.stage,
            "tool": ev.tool,
            "action": ev.action,
            "redactions": ev.redactions,
        });
        if let Some(hit) = &ev.hit {
            // The rule and where it is declared; never the matched text.
            fields["skill"] = json!(hit.skill);
            fields["field"] = json!(hit.field);
            fields["pattern"] = json!(hit.pattern);
        }
        // Inside a task: task_id is the task's id and context_id its conversation. Outside one
        // (an MCP session, `forge tool call`): task_id names the session, as before.
        let task_id = match &ev.task_id {
            Some(t) => {
                fields["context_id"] = json!(ev.session_key);
                t.as_str()
            }
            None => ev.session_key.as_str(),
        };
        self.0.emit(Some(task_id), events::GUARDRAIL_CHECK, fields);
    }

    fn on_call(&self, ev: &CallEvent) {
        // Sizes only, never the arguments or the output (as the loop's tool_exec).
        let mut fields = json!({
            "tool": ev.tool,
            "duration_ms": ev.duration_ms,
            "input_bytes": ev.input_bytes,
            "ok": ev.result.is_ok(),
        });
        match &ev.result {
            Ok(chars) => fields["output_chars"] = json!(chars),
            Err((kind, msg)) => {
                fields["error_kind"] = json!(kind);
                fields["error"] = json!(msg.chars().take(300).collect::<String>());
            }
        }
        self.0.emit(
            Some(&ev.session_key),
            events::tool_call_event(&ev.tool),
            fields,
        );
    }
}

/// Writes `egress_allowed` / `egress_blocked` audit events for the decisions of the egress proxy
/// (`via: proxy`) or the egress HTTP client (`via: client`: http_request, web_fetch, model calls).
pub(crate) struct AuditEgressObserver {
    audit: AuditLog,
    via: &'static str,
}

impl AuditEgressObserver {
    /// An observer for the egress proxy.
    pub(crate) fn proxy(audit: AuditLog) -> Self {
        Self {
            audit,
            via: "proxy",
        }
    }

    /// An observer for the egress HTTP client.
    pub(crate) fn client(audit: AuditLog) -> Self {
        Self {
            audit,
            via: "client",
        }
    }
}

impl EgressObserver for AuditEgressObserver {
    fn on_decision(&self, d: &Decision) {
        let event = match d.outcome {
            Outcome::Allowed => events::EGRESS_ALLOWED,
            Outcome::Blocked | Outcome::Malformed => events::EGRESS_BLOCKED,
            // Allowed by policy but the upstream failed: the policy allowed it.
            Outcome::Failed => events::EGRESS_ALLOWED,
        };
        // Written per request on the proxy's thread: the flat form builds no JSON value.
        let ip = d.chosen.map(|a| a.ip().to_string());
        let reason = d.reason.to_string();
        self.audit.emit_flat(
            None,
            event,
            &[
                ("via", Field::Str(self.via)),
                ("method", Field::Str(&d.method)),
                ("host", Field::Str(&d.host)),
                ("port", Field::U64(u64::from(d.port))),
                ("ip", ip.as_deref().map_or(Field::Null, Field::Str)),
                ("status", Field::U64(u64::from(d.status))),
                ("reason", Field::Str(&reason)),
                ("bytes_up", Field::U64(d.bytes_up)),
                ("bytes_down", Field::U64(d.bytes_down)),
                ("duration_ms", Field::U64(d.duration.as_millis() as u64)),
            ],
        );
    }
}

/// Closes a task's browser session through the assembled tools, and writes a `browser_launch`
/// audit event whenever Chromium was (re)started (it starts lazily, on the first browser call).
pub(crate) struct AssembledSessions {
    tools: Arc<AssembledTools>,
    audit: AuditLog,
    launches_seen: AtomicU64,
    /// Sessions' own proxy listeners, by session key.
    scoped: tokio::sync::Mutex<std::collections::HashMap<String, ScopedProxy>>,
    /// The agent's login profiles (forge.yaml `browser.profiles`), when it has any.
    profiles: Option<Arc<Profiles>>,
    /// The profile each session's running task loaded, by session key.
    loaded: tokio::sync::Mutex<std::collections::HashMap<String, LoadedProfile>>,
    /// The profile each session was opened with (a conversation's browser keeps it).
    opened_with: tokio::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl AssembledSessions {
    /// The browser side of `tools`, auditing to `audit`: a browser session that ends on its own
    /// (idle, shutdown, crash) is audited as `browser_session_close` with its reason.
    pub(crate) fn new(tools: Arc<AssembledTools>, audit: AuditLog) -> Self {
        if let Some(b) = tools.browser() {
            for m in b.managers() {
                m.set_on_session_closed(audit_session_close(audit.clone(), None));
            }
        }
        Self {
            tools,
            audit,
            launches_seen: AtomicU64::new(0),
            scoped: tokio::sync::Mutex::new(std::collections::HashMap::new()),
            profiles: None,
            loaded: tokio::sync::Mutex::new(std::collections::HashMap::new()),
            opened_with: tokio::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The same, with the agent's login profiles.
    pub(crate) fn with_profiles(mut self, profiles: Option<Arc<Profiles>>) -> Self {
        self.profiles = profiles;
        self
    }

    /// Only the login-profile side of `tools` (for MCP sessions): unlike [`Self::new`] it
    /// leaves the browser's closed-session hook alone.
    pub(crate) fn for_profiles(
        tools: Arc<AssembledTools>,
        audit: AuditLog,
        profiles: Arc<Profiles>,
    ) -> Self {
        Self {
            tools,
            audit,
            launches_seen: AtomicU64::new(0),
            scoped: tokio::sync::Mutex::new(std::collections::HashMap::new()),
            profiles: Some(profiles),
            loaded: tokio::sync::Mutex::new(std::collections::HashMap::new()),
            opened_with: tokio::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// A profile task of session `key` made a browser call: keep the local storage of the
    /// profile origins its tabs show now, so that an origin it leaves before its end is still
    /// saved as it last was.
    pub(crate) async fn snapshot_profile_storage(&self, key: &str) {
        let Some(b) = self.tools.browser() else {
            return;
        };
        let origins = self.loaded.lock().await.get(key).map(|l| l.origins.clone());
        if let Some(origins) = origins {
            let seen = b.manager().read_session_storage(key, &origins).await;
            if let Some(l) = self.loaded.lock().await.get_mut(key) {
                l.seen_storage.extend(seen);
            }
        }
    }
}

/// Whether any engine's manager has a live session `key`.
async fn any_session(b: &crate::assemble::BrowserParts, key: &str) -> bool {
    for m in b.managers() {
        if m.has_session(key).await {
            return true;
        }
    }
    false
}

/// Stop session `key`'s own proxy listeners (every engine's) and forget them in the managers.
async fn end_scoped(b: &crate::assemble::BrowserParts, key: &str, v: ScopedProxy) {
    for m in b.managers() {
        m.set_session_proxy(key, None);
    }
    for (handle, slot) in v.listeners {
        handle.shutdown().await;
        drop(slot);
    }
}

/// A session's own proxy listener (the scope of the task that opened it) and the tasks using it.
struct ScopedProxy {
    /// One listener per engine the agent runs (two when its browser skills use both: each
    /// engine's session of this key goes through its own), each with the listener inside that
    /// confined browser's namespace it serves, if any; a slot is given back to the spares when
    /// dropped, after its handle stopped serving it.
    listeners: Vec<(
        ProxyHandle,
        Option<forge_browser::devtools_relay::NamespaceSlot>,
    )>,
    /// The policy the listener serves now (the first task's, narrowed by later ones).
    policy: Arc<EgressPolicy>,
    scope: Option<Vec<String>>,
    observer: Arc<SwitchObserver>,
    users: usize,
}

/// An egress observer that passes decisions to the observer of the task now using the session.
struct SwitchObserver(std::sync::Mutex<Arc<dyn EgressObserver>>);

impl SwitchObserver {
    fn new(first: Arc<dyn EgressObserver>) -> Self {
        Self(std::sync::Mutex::new(first))
    }

    fn set(&self, next: Arc<dyn EgressObserver>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = next;
    }
}

impl EgressObserver for SwitchObserver {
    fn on_decision(&self, d: &Decision) {
        let o = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        o.on_decision(d);
    }
}

/// A closed-session hook writing `browser_session_close {session, reason}` for the sessions that
/// end on their own (`idle`, `shutdown`, `crashed`; a close on request is audited by whoever asked:
/// the task, or the `browser_close` tool call), then calling `then` for every close (the A2A
/// server clears its record of which replica holds the conversation's browser).
pub(crate) fn audit_session_close(
    audit: AuditLog,
    then: Option<forge_browser::SessionClosedHook>,
) -> forge_browser::SessionClosedHook {
    Arc::new(move |key: &str, why: forge_browser::CloseReason| {
        if why != forge_browser::CloseReason::Closed {
            audit.emit(
                None,
                events::BROWSER_SESSION_CLOSE,
                json!({"session": key, "reason": why.as_str()}),
            );
        }
        if let Some(t) = &then {
            t(key, why);
        }
    })
}

#[async_trait]
impl SessionCloser for AssembledSessions {
    fn check_profile(&self, name: &str) -> Result<(), String> {
        match &self.profiles {
            Some(p) => p.check(name).map_err(|e| e.to_string()),
            None => Err(format!(
                "there is no login profile `{name}`: forge.yaml has no browser.profiles; add `browser: {{profiles: {{{name}: {{origins: [\"https://...\"]}}}}}}`"
            )),
        }
    }

    async fn open_profile(&self, key: &str, task_id: &str, name: &str) -> Result<(), String> {
        self.check_profile(name)?;
        let (Some(p), Some(b)) = (&self.profiles, self.tools.browser()) else {
            return Err(format!(
                "login profile `{name}` needs the browser, and this agent has none"
            ));
        };
        if self.loaded.lock().await.contains_key(key) {
            return Err(format!(
                "browser session {key} already runs a task with a login profile; send the next message when it ends"
            ));
        }
        // A conversation's open browser keeps the cookies it has: a task naming another
        // profile (or one where the browser was opened without) would save them into this one.
        {
            let mut opened = self.opened_with.lock().await;
            if b.manager().has_session(key).await {
                match opened.get(key) {
                    Some(n) if n == name => {}
                    other => {
                        let was = match other {
                            Some(n) => format!("with login profile `{n}`"),
                            None => "without a login profile".to_string(),
                        };
                        return Err(format!(
                            "this conversation's browser was opened {was}, and this task names `{name}`; start a new conversation (another contextId), or end the browser first (metadata.forge.close_browser: true on the last message)"
                        ));
                    }
                }
            } else {
                opened.insert(key.to_string(), name.to_string());
            }
        }
        let loaded = p.load(name).await.map_err(|e| e.to_string())?;
        self.audit.emit(
            Some(task_id),
            events::PROFILE_LOAD,
            json!({
                "profile": name,
                "session": key,
                "version": loaded.version,
                "cookies": loaded.state.cookies.len(),
                "storage_origins": loaded.state.local_storage.len(),
            }),
        );
        b.manager().set_session_profile(
            key,
            Some(Arc::new(forge_browser::SessionProfile {
                name: name.to_string(),
                origins: loaded.origins.clone(),
                state: loaded.state.clone(),
            })),
        );
        self.loaded.lock().await.insert(key.to_string(), loaded);
        Ok(())
    }

    async fn end_profile(&self, key: &str, task_id: &str, save: bool) {
        let Some(loaded) = self.loaded.lock().await.remove(key) else {
            return;
        };
        let (Some(p), Some(b)) = (&self.profiles, self.tools.browser()) else {
            return;
        };
        let m = b.manager();
        m.set_session_profile(key, None);
        if !save {
            return;
        }
        let fields = match m.read_session_profile(key, &loaded.origins).await {
            Ok(None) => {
                json!({"profile": loaded.name, "saved": false, "reason": "the browser session was already closed (idle, crash or shutdown)"})
            }
            Err(e) => {
                json!({"profile": loaded.name, "saved": false, "reason": format!("cannot read the session's cookies and storage: {e}")})
            }
            Ok(Some(state)) => {
                let (cookies, origins) = (state.cookies.len(), state.local_storage.len());
                match p.save(&loaded, state).await {
                    Ok(forge_state::ProfileSave::Saved { version }) => {
                        json!({"profile": loaded.name, "saved": true, "version": version, "cookies": cookies, "storage_origins": origins})
                    }
                    Ok(forge_state::ProfileSave::Stale { current }) => {
                        json!({"profile": loaded.name, "saved": false, "reason": format!("another task saved the profile since this one loaded it (version {:?}, now {:?}); this task's changes were not saved", loaded.version, current)})
                    }
                    Ok(_) => {
                        json!({"profile": loaded.name, "saved": false, "reason": "unknown store answer"})
                    }
                    Err(e) => {
                        json!({"profile": loaded.name, "saved": false, "reason": e.to_string()})
                    }
                }
            }
        };
        if fields["saved"] != json!(true) {
            tracing::warn!(profile = %loaded.name, "login profile not saved: {}", fields["reason"]);
        }
        self.audit.emit(Some(task_id), events::PROFILE_SAVE, fields);
    }

    fn browser(&self) -> Option<Arc<forge_browser::BrowserManager>> {
        self.tools.browser().map(|b| b.manager().clone())
    }

    async fn close_session(&self, key: &str) {
        self.tools.close_session(key).await;
        if let Some(b) = self.tools.browser() {
            for m in b.managers() {
                m.set_session_proxy(key, None);
            }
        }
    }

    fn form_tool(&self, name: &str) -> Option<Arc<dyn forge_tools::Tool>> {
        let b = self.tools.browser()?;
        b.form_tools().iter().find(|t| t.name() == name).cloned()
    }

    fn secrets(&self) -> forge_tools::Secrets {
        self.tools.secrets().clone()
    }

    fn max_sessions(&self) -> usize {
        self.tools
            .browser()
            .map(|b| b.manager().config().max_sessions)
            .unwrap_or(1)
    }

    async fn has_session(&self, key: &str) -> bool {
        match self.tools.browser() {
            Some(b) => any_session(b, key).await,
            None => false,
        }
    }

    async fn after_browser_call(&self, key: &str) {
        let Some(b) = self.tools.browser() else {
            return;
        };
        let m = b.manager();
        self.snapshot_profile_storage(key).await;
        let launches = m.launch_count();
        let before = self.launches_seen.swap(launches, Ordering::SeqCst);
        if launches > before {
            self.audit.emit(
                Some(key),
                events::BROWSER_LAUNCH,
                json!({
                    "binary": b.binary().display().to_string(),
                    "pid": m.browser_pid().await,
                    "launches": launches,
                    "launch_ms": m.launch_duration().await.map(|d| d.as_millis() as u64),
                    "proxy": self.tools.egress().proxy_url(),
                }),
            );
        }
    }

    /// Live sessions count: a conversation's browser stays open between its messages.
    async fn at_capacity(&self) -> Option<usize> {
        let b = self.tools.browser()?;
        let cap = b.manager().config().max_sessions;
        for m in b.managers() {
            if m.session_count().await >= cap {
                return Some(cap);
            }
        }
        None
    }

    async fn open_scoped_proxy(
        &self,
        key: &str,
        policy: Arc<EgressPolicy>,
        observer: Arc<dyn EgressObserver>,
    ) -> Result<(), String> {
        let Some(b) = self.tools.browser() else {
            return Ok(());
        };
        let mut kept = self.scoped.lock().await;
        // Listeners of sessions that ended on their own (idle, shutdown, crash) with no task
        // left in them stop here.
        let mut gone = Vec::new();
        for (k, v) in kept.iter() {
            if v.users == 0 && !any_session(b, k).await {
                gone.push(k.clone());
            }
        }
        for k in gone {
            if let Some(v) = kept.remove(&k) {
                end_scoped(b, &k, v).await;
            }
        }
        // Entries in any order name the same scope.
        let scope = policy.scope().map(|mut s| {
            s.sort();
            s.dedup();
            s
        });
        if let Some(v) = kept.get_mut(key) {
            // A conversation's browser keeps the scope of the task that opened it, narrowed by
            // each later task that asks for a scope within it (never widened): a task asking
            // for none browses in the conversation's scope; one asking for hosts outside it is
            // refused rather than given a browser beyond it.
            if let Some(asked) = scope.as_ref().filter(|a| Some(*a) != v.scope.as_ref()) {
                let show = |s: &Option<Vec<String>>| match s {
                    Some(s) => format!("allowed_hosts [{}]", s.join(", ")),
                    None => "the agent's whole allowlist".to_string(),
                };
                let narrowed = v
                    .policy
                    .narrow(asked, "metadata.forge.allowed_hosts")
                    .map_err(|e| {
                        format!(
                            "this conversation's browser session has {}, and this task asks for allowed_hosts [{}], which is not within it ({}): a conversation's browser keeps the scope of its first task, and a later task can only narrow it. Send metadata.forge.close_browser: true with a message (or use a new contextId) to start a browser session with another scope",
                            show(&v.scope),
                            asked.join(", "),
                            e.value
                        )
                    })?;
                let narrowed = Arc::new(narrowed);
                for (handle, _) in &v.listeners {
                    handle.narrow_to(narrowed.clone());
                }
                v.policy = narrowed;
                v.scope = Some(asked.clone());
            }
            v.observer.set(observer);
            v.users += 1;
            return Ok(());
        }
        let switch = Arc::new(SwitchObserver::new(observer));
        // Each engine's session of this key gets a listener serving the task's policy: a
        // confined browser reaches only listeners inside its own namespace, so there it is one
        // of that browser's spares (on Lightpanda, of the session's own process).
        let mut listeners = Vec::new();
        for m in b.managers() {
            let made = async {
                let slot = m.namespace_slot(key).await.map_err(|e| e.to_string())?;
                let listener = match &slot {
                    Some(s) => Some(s.listener().map_err(|e| {
                        format!("cannot use a proxy listener inside the browser's namespace: {e}")
                    })?),
                    None => None,
                };
                match self
                    .tools
                    .egress()
                    .serve_task_proxy(policy.clone(), switch.clone(), listener)
                    .await
                {
                    None => Ok(None),
                    Some(Err(e)) => Err(format!(
                        "cannot start the task's egress proxy listener: {e}"
                    )),
                    Some(Ok(handle)) => Ok(Some((handle, slot))),
                }
            }
            .await;
            match made {
                Ok(Some((handle, slot))) => {
                    let addr = slot.as_ref().map(|s| s.addr).unwrap_or(handle.addr());
                    m.set_session_proxy(key, Some(addr));
                    listeners.push((handle, slot));
                }
                // The agent runs no proxy: nothing to scope.
                Ok(None) => return Ok(()),
                Err(e) => {
                    // The listeners made for the other engine stop: no half-scoped session.
                    for m in b.managers() {
                        m.set_session_proxy(key, None);
                    }
                    for (handle, slot) in listeners {
                        handle.shutdown().await;
                        drop(slot);
                    }
                    return Err(e);
                }
            }
        }
        kept.insert(
            key.to_string(),
            ScopedProxy {
                listeners,
                policy,
                scope,
                observer: switch,
                users: 1,
            },
        );
        Ok(())
    }

    async fn release_scoped_proxy(&self, key: &str) {
        let Some(b) = self.tools.browser() else {
            return;
        };
        let mut kept = self.scoped.lock().await;
        let Some(v) = kept.get_mut(key) else {
            return;
        };
        v.users = v.users.saturating_sub(1);
        if v.users == 0 && !any_session(b, key).await {
            if let Some(v) = kept.remove(key) {
                end_scoped(b, key, v).await;
            }
        }
    }

    async fn navigations(&self, key: &str) -> Vec<NavigationRecord> {
        let Some(b) = self.tools.browser() else {
            return Vec::new();
        };
        // Every engine's session of this key (the default engine's first).
        let mut out = Vec::new();
        for m in b.managers() {
            out.extend(
                m.navigations(key)
                    .await
                    .into_iter()
                    .map(|n| NavigationRecord {
                        url: n.url,
                        status: n.status,
                    }),
            );
        }
        out
    }
}
