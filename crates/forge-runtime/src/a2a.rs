//! The A2A server behind `forge run`: JSON-RPC 2.0 on `POST /` speaking A2A protocol 0.3
//! (`message/send`, `message/stream` over Server-Sent Events with tool progress, `tasks/get`,
//! `tasks/cancel`, `tasks/resubscribe`) and, through [`v1`], 1.0; the agent card at
//! `/.well-known/agent-card.json` (also the older `/.well-known/agent.json`), and `GET /healthz`.
//!
//! - [`tasks`]: the task store (state, history, artifacts, cancellation, stream subscribers) and
//!   the A2A JSON shapes.
//! - [`http`]: the hyper server, routing, bearer-token check, body limits and SSE.
//! - `live`: the live view (`/ui/tasks/{id}/live`) and the hand-off page (`/handoff/...`) of
//!   `browser_handoff`, and the task state `input-required` while a person is needed.
//! - `forms`: the form skills (`metadata.skill` = `learn-form-schema` / `execute-form-batch`) run
//!   as tasks: a row's progress as a status update, the schema or results as artifacts.
//! - [`v1`]: the A2A 1.0 method names and wire shapes, translated to and from the 0.3 core; the
//!   card lists both interfaces (`supportedInterfaces`), so 1.0 clients use 1.0 and 0.3 clients 0.3.
//!
//! Binding: the CLI binds 127.0.0.1 by default. When it binds anything else, a bearer token is
//! required on `POST /` (the card and `/healthz` stay public so probes and discovery work);
//! the token is generated into `.forge/runtime.token` ([`load_or_create_token`]).

mod cancel;
pub(crate) mod files;
mod forms;
pub(crate) mod forward;
pub(crate) mod http;
mod live;
mod scheduler;
pub(crate) mod store;
pub(crate) mod v1;
mod watch;
pub(crate) mod wire;

use std::path::Path;

use serde_json::{json, Value};

pub(crate) use http::serve_probe;
pub use http::{serve, ServerHandle};
pub use store::TaskStore;

/// The A2A protocol version forge speaks.
pub(crate) const PROTOCOL_VERSION: &str = "0.3.0";

/// What the agent card says about the agent.
#[derive(Debug, Clone)]
pub struct CardInfo {
    /// The agent's name (forge.yaml `agent_id`).
    pub name: String,
    /// A description.
    pub description: String,
    /// The agent's version.
    pub version: String,
    /// Skills from SKILL.md front matter: (id/name, description, tags).
    pub skills: Vec<(String, String, Vec<String>)>,
}

/// The agent card JSON for an agent served at `url` (`http://host:port/`).
pub fn agent_card(info: &CardInfo, url: &str, token_required: bool) -> Value {
    let skills: Vec<Value> = info
        .skills
        .iter()
        .map(|(name, desc, tags)| {
            json!({
                "id": name,
                "name": name,
                "description": if desc.trim().is_empty() { format!("The {name} skill") } else { desc.clone() },
                "tags": tags,
            })
        })
        .collect();
    let mut card = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "name": info.name,
        "description": info.description,
        "url": url,
        "preferredTransport": "JSONRPC",
        "version": info.version,
        "capabilities": {"streaming": true, "pushNotifications": false, "stateTransitionHistory": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "provider": {"organization": "forge", "url": "https://example.invalid/forge"},
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
    });
    if token_required {
        card["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer", "description": "The token in .forge/runtime.token"}});
        card["security"] = json!([{"bearer": []}]);
    }
    card
}

/// Read the bearer token from `path`, or generate one (32 random bytes, hex) and write it there
/// with mode 0600. Returns the token and whether it was newly generated.
pub fn load_or_create_token(path: &Path) -> std::io::Result<(String, bool)> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let t = existing.trim();
        if t.len() >= 32 && t.chars().all(|c| c.is_ascii_graphic()) {
            return Ok((t.to_string(), false));
        }
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    let mut f = opts.open(path)?;
    // `mode` applies only when the file is created: an existing (unusable) file keeps its mode,
    // so make it private before the token goes in.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    Ok((token, true))
}
