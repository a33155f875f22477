//! forge-llm: the model providers and their transport. Depends only on forge-egress (every model
//! request leaves through the agent's egress client).
//!
//! - [`Provider`], [`ChatRequest`], [`ChatResponse`], [`Message`], [`ProviderError`],
//!   [`resolve_model`], [`RetryPolicy`] (lib.rs): the conversation types, the trait, model
//!   choice, retries and the one HTTP status mapping every provider uses.
//! - [`openai`] (openai.rs): OpenAI Chat Completions and compatible servers.
//! - [`anthropic`] (anthropic.rs): Anthropic Messages.
//! - [`scripted`] (scripted.rs): replays a YAML file of assistant turns (tests, demos).
//! - [`fallback`] (fallback.rs): a chain of providers tried in order.
//! - [`transport`] (transport.rs): [`ModelHttp`] over forge-egress's client.
//!
//! LLM providers: the conversation types the agent loop speaks, the [`Provider`] trait, how the
//! model is chosen ([`resolve_model`]), and the three providers:
//!
//! - [`openai`]: OpenAI Chat Completions with tools; `base_url` makes it work with Ollama, vLLM,
//!   llama.cpp server, OpenRouter and other compatible servers (`ollama` is an alias with Ollama's
//!   default URL and no key).
//! - [`anthropic`]: Anthropic Messages with tool use.
//! - [`scripted`]: replays a YAML file of assistant turns. A test and demo device, not a model.
//!
//! Every HTTP request goes through a [`ModelHttp`] transport; in `forge run` that is the egress
//! client ([`transport::EgressTransport`]), so model traffic obeys the agent's egress policy, and the
//! provider's host is added to the allowlist by the runner ([`ResolvedModel::egress_entry`]).
//! Requests have a time limit and are retried with exponential backoff on 429 and 5xx
//! ([`RetryPolicy`]); 401/403 and unknown models are clear errors naming the provider and the fix.

pub mod anthropic;
pub mod fallback;
pub mod openai;
pub mod scripted;
pub mod transport;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A tool the model may call, as described to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its input object.
    pub input_schema: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (echoed back with the result).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The input object (a JSON string when the model sent invalid JSON).
    pub arguments: Value,
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model sees.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// One entry of the conversation (the system prompt travels separately). Serialised as JSON
/// in the state store's contexts.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Message {
    /// The user's message.
    User(String),
    /// A model turn: optional text and the tool calls it made.
    Assistant {
        /// Text the model wrote (may be empty when it only called tools).
        text: String,
        /// Tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous assistant turn's tool calls, in call order.
    ToolResults(Vec<ToolResult>),
}

/// What the loop sends the model.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
}

/// Token counts reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// What the model answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    /// Text (the final answer when there are no tool calls).
    pub text: String,
    /// Tool calls to execute.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    pub usage: Usage,
    /// The provider's stop/finish reason, when given.
    pub stop_reason: Option<String>,
    /// HTTP attempts it took (1 when no retry was needed; 0 for the scripted provider).
    pub attempts: u32,
    /// `provider/model` of the fallback that answered, when the primary model failed.
    pub served_by: Option<String>,
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The configuration is incomplete or wrong (no provider, no key, unknown provider, bad URL).
    #[error("{0}")]
    Config(String),
    /// The provider rejected the credentials.
    #[error(
        "{provider} rejected the request as unauthorized (HTTP {status} from {host}): {detail}. \
         Set {env_var} to a valid API key for {host}"
    )]
    Unauthorized {
        /// The provider.
        provider: String,
        /// The HTTP status (401 or 403).
        status: u16,
        /// The endpoint's host.
        host: String,
        /// The variable that holds the key.
        env_var: String,
        /// The provider's message.
        detail: String,
    },
    /// The provider does not know the model.
    #[error(
        "{provider} does not know the model '{model}' (HTTP {status} from {host}): {detail}. \
         Set model.name in forge.yaml, MODEL_NAME or --model to a model this endpoint serves"
    )]
    UnknownModel {
        /// The provider.
        provider: String,
        /// The model asked for.
        model: String,
        /// The HTTP status.
        status: u16,
        /// The endpoint's host.
        host: String,
        /// The provider's message.
        detail: String,
    },
    /// The provider kept failing with a retryable status or transport error.
    #[error("{provider} request failed after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// The provider.
        provider: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// A non-retryable HTTP error.
    #[error("{provider} returned HTTP {status} from {host}: {detail}")]
    Http {
        /// The provider.
        provider: String,
        /// The status.
        status: u16,
        /// The endpoint's host.
        host: String,
        /// The provider's message.
        detail: String,
    },
    /// The egress policy refused the request (the message starts with "blocked by egress policy:").
    #[error("{0}")]
    Blocked(String),
    /// The response was not what the API promises.
    #[error("{provider} sent a response forge cannot read: {detail}")]
    BadResponse {
        /// The provider.
        provider: String,
        /// What was wrong.
        detail: String,
    },
    /// The scripted provider ran out of turns or its file is wrong.
    #[error("{0}")]
    Script(String),
    /// The primary model and every `model.fallbacks` entry failed (each failure listed).
    #[error("every configured model failed: {0}")]
    AllFailed(String),
    /// The task was cancelled while waiting for the model.
    #[error("cancelled")]
    Cancelled,
}

/// A language model the agent loop can talk to.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name (`openai`, `anthropic`, `scripted`, ...).
    fn name(&self) -> &str;
    /// The model name (for the scripted provider: the script file).
    fn model(&self) -> &str;
    /// The endpoint host, for audit events (`None` for the scripted provider).
    fn host(&self) -> Option<String>;
    /// One model turn. Must return [`ProviderError::Cancelled`] promptly when `cancel` fires.
    async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError>;
}

/// An HTTP reply as the providers need it.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// Status code.
    pub status: u16,
    /// The `Retry-After` header in seconds, when present and numeric.
    pub retry_after: Option<Duration>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request did not produce a reply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The egress policy refused it (message starts with "blocked by egress policy:").
    #[error("{0}")]
    Blocked(String),
    /// Connecting or talking to the server failed (retryable).
    #[error("{0}")]
    Io(String),
}

/// How providers send HTTP: a JSON POST. In `forge run` this is the egress client.
#[async_trait]
pub trait ModelHttp: Send + Sync {
    /// POST `body` (JSON) to `url` with `headers`; return status, Retry-After and body.
    async fn post_json(
        &self,
        url: &url::Url,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<HttpReply, TransportError>;
}

/// Retry and time-limit settings for model requests.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// First backoff delay; doubled after every retry, plus up to 25% jitter.
    pub base_delay: Duration,
    /// The longest single wait (also caps a server's Retry-After).
    pub max_delay: Duration,
    /// The time limit for one HTTP attempt.
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            request_timeout: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The defaults, with `FORGE_MODEL_TIMEOUT_SECS` and `FORGE_MODEL_MAX_RETRIES` applied.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut p = Self::default();
        if let Some(s) = env("FORGE_MODEL_TIMEOUT_SECS").and_then(|v| v.trim().parse::<u64>().ok())
        {
            if s > 0 {
                p.request_timeout = Duration::from_secs(s);
            }
        }
        if let Some(n) = env("FORGE_MODEL_MAX_RETRIES").and_then(|v| v.trim().parse::<u32>().ok()) {
            p.max_retries = n.min(10);
        }
        p
    }

    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max_delay);
        }
        let exp = self.base_delay.saturating_mul(1u32 << retry.min(16));
        let jitter = exp.mul_f64(rand::random::<f64>() * 0.25);
        (exp + jitter).min(self.max_delay)
    }
}

/// Whether a status is worth retrying: 408, 409 (Anthropic lock), 429, 5xx (incl. 529 overloaded).
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// Send `body` with retries, the time limit and cancellation; returns the first non-retryable reply.
/// Shared by the HTTP providers.
pub(crate) async fn send_with_retry(
    http: &dyn ModelHttp,
    provider: &str,
    retry: &RetryPolicy,
    url: &url::Url,
    headers: &[(String, String)],
    body: Vec<u8>,
    cancel: &CancellationToken,
) -> Result<(HttpReply, u32), ProviderError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let fut = tokio::time::timeout(
            retry.request_timeout,
            http.post_json(url, headers, body.clone()),
        );
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
            r = fut => r,
        };
        let (failure, retry_after) = match outcome {
            Err(_) => (
                format!(
                    "no answer within {:?} (request timeout)",
                    retry.request_timeout
                ),
                None,
            ),
            Ok(Err(TransportError::Blocked(m))) => return Err(ProviderError::Blocked(m)),
            Ok(Err(TransportError::Io(m))) => (m, None),
            Ok(Ok(reply)) if retryable_status(reply.status) => {
                let detail = error_detail(&reply.body);
                (
                    format!("HTTP {}: {detail}", reply.status),
                    reply.retry_after,
                )
            }
            Ok(Ok(reply)) => return Ok((reply, attempt)),
        };
        if attempt > retry.max_retries {
            return Err(ProviderError::RetriesExhausted {
                provider: provider.to_string(),
                attempts: attempt,
                last: failure,
            });
        }
        let wait = retry.delay(attempt - 1, retry_after);
        tracing::warn!("{provider}: attempt {attempt} failed ({failure}); retrying in {wait:?}");
        tokio::select! {
            _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The error for a provider's non-2xx reply, the same mapping for every provider: 401/403 is
/// [`ProviderError::Unauthorized`] naming `env_var`; 400/404 whose body says the model is unknown
/// (the provider's own `is_model_error`) is [`ProviderError::UnknownModel`]; anything else is
/// [`ProviderError::Http`]. The detail is the body's error message ([`error_detail`]).
pub(crate) fn status_error(
    reply: &HttpReply,
    provider: &str,
    model: &str,
    host: String,
    env_var: &str,
    is_model_error: fn(&[u8]) -> bool,
) -> ProviderError {
    let detail = error_detail(&reply.body);
    match reply.status {
        401 | 403 => ProviderError::Unauthorized {
            provider: provider.to_string(),
            status: reply.status,
            host,
            env_var: env_var.to_string(),
            detail,
        },
        400 | 404 if is_model_error(&reply.body) => ProviderError::UnknownModel {
            provider: provider.to_string(),
            model: model.to_string(),
            status: reply.status,
            host,
            detail,
        },
        status => ProviderError::Http {
            provider: provider.to_string(),
            status,
            host,
            detail,
        },
    }
}

/// The error message inside an API error body (`{"error":{"message":..}}` and similar), shortened.
pub(crate) fn error_detail(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let msg = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            let e = v.get("error").cloned().unwrap_or(v);
            e.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| e.as_str().map(str::to_string))
        })
        .unwrap_or_else(|| text.trim().to_string());
    let mut s: String = msg.chars().take(300).collect();
    if s.is_empty() {
        s = "(empty body)".into();
    }
    s
}

/// The host (and non-default port) of `url`, as shown in messages and audit events.
pub(crate) fn host_of(url: &url::Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => url.to_string(),
    }
}

/// The providers forge knows.
pub const KNOWN_PROVIDERS: [&str; 4] = ["openai", "anthropic", "ollama", "scripted"];

/// Where a model setting came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// forge.yaml `model`.
    Config,
    /// `FORGE_MODEL_PROVIDER` / `MODEL_NAME` / `*_BASE_URL`.
    Env,
    /// `--provider` / `--model`.
    Cli,
    /// Inferred from which API key is set.
    ApiKey,
    /// forge's default for the provider.
    Default,
}

/// The model the agent will use, after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// `openai`, `anthropic`, `ollama` or `scripted`.
    pub provider: String,
    /// The model name (for `scripted`: the script path, relative to the agent dir).
    pub name: String,
    /// The API base URL (`None` for `scripted`).
    pub base_url: Option<String>,
    /// Where the provider choice came from.
    pub provider_origin: Origin,
}

/// The forge.yaml `model` section, as the resolver needs it.
#[derive(Debug, Clone, Default)]
pub struct ModelSettings {
    /// `model.provider`.
    pub provider: Option<String>,
    /// `model.name`.
    pub name: Option<String>,
    /// `model.base_url`.
    pub base_url: Option<String>,
}

/// The default model per provider, used when no name is configured.
pub fn default_model(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("gpt-4o-mini"),
        "anthropic" => Some("claude-sonnet-4-20250514"),
        "ollama" => Some("llama3.1"),
        _ => None,
    }
}

/// The default base URL per provider.
pub fn default_base_url(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("https://api.openai.com/v1"),
        "anthropic" => Some("https://api.anthropic.com"),
        "ollama" => Some("http://localhost:11434/v1"),
        _ => None,
    }
}

/// The environment variable that holds a provider's API key.
pub fn key_env(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("OPENAI_API_KEY"),
        "anthropic" => Some("ANTHROPIC_API_KEY"),
        _ => None,
    }
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Choose the provider, model and base URL. Layers, each overriding the one before: forge.yaml
/// `model`, then `FORGE_MODEL_PROVIDER`/`MODEL_NAME`, then `--provider`/`--model`; when still no
/// provider is chosen, whichever of `OPENAI_API_KEY`/`ANTHROPIC_API_KEY` is set (OpenAI first).
/// Base URL: forge.yaml `model.base_url`, else `OPENAI_BASE_URL`/`ANTHROPIC_BASE_URL`/
/// `OLLAMA_BASE_URL` for the chosen provider, else the provider's default.
pub fn resolve_model(
    config: &ModelSettings,
    cli_provider: Option<&str>,
    cli_model: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedModel, ProviderError> {
    let mut provider = nonempty(config.provider.clone()).map(|p| (p, Origin::Config));
    let mut name = nonempty(config.name.clone());
    if let Some(p) = nonempty(env("FORGE_MODEL_PROVIDER")) {
        if provider.as_ref().map(|(q, _)| q) != Some(&p) {
            // A different provider from the environment: forge.yaml's model name was for the other one.
            name = None;
        }
        provider = Some((p, Origin::Env));
    }
    if let Some(n) = nonempty(env("MODEL_NAME")) {
        name = Some(n);
    }
    if let Some(p) = nonempty(cli_provider.map(str::to_string)) {
        if provider.as_ref().map(|(q, _)| q) != Some(&p) && cli_model.is_none() {
            name = None;
        }
        provider = Some((p, Origin::Cli));
    }
    if let Some(n) = nonempty(cli_model.map(str::to_string)) {
        name = Some(n);
    }
    if provider.is_none() {
        if nonempty(env("OPENAI_API_KEY")).is_some() {
            provider = Some(("openai".into(), Origin::ApiKey));
        } else if nonempty(env("ANTHROPIC_API_KEY")).is_some() {
            provider = Some(("anthropic".into(), Origin::ApiKey));
        }
    }
    let Some((provider, provider_origin)) = provider else {
        return Err(ProviderError::Config(
            "no model provider configured: set model.provider in forge.yaml (openai, anthropic, \
             ollama or scripted), or FORGE_MODEL_PROVIDER, or --provider, or export \
             OPENAI_API_KEY / ANTHROPIC_API_KEY"
                .into(),
        ));
    };
    let provider = provider.to_ascii_lowercase();
    if !KNOWN_PROVIDERS.contains(&provider.as_str()) {
        return Err(ProviderError::Config(format!(
            "unknown model provider '{provider}': known providers are {}. For an OpenAI-compatible \
             server (vLLM, llama.cpp, OpenRouter, ...) use provider openai with model.base_url",
            KNOWN_PROVIDERS.join(", ")
        )));
    }
    let name =
        match name.or_else(|| default_model(&provider).map(str::to_string)) {
            Some(n) => n,
            None => return Err(ProviderError::Config(
                "the scripted provider needs a script: set model.name in forge.yaml (or --model) \
                 to the path of the script file"
                    .into(),
            )),
        };
    let base_url = if provider == "scripted" {
        None
    } else {
        let env_var = match provider.as_str() {
            "openai" => "OPENAI_BASE_URL",
            "anthropic" => "ANTHROPIC_BASE_URL",
            _ => "OLLAMA_BASE_URL",
        };
        let raw = nonempty(config.base_url.clone())
            .or_else(|| nonempty(env(env_var)))
            .or_else(|| default_base_url(&provider).map(str::to_string));
        if let Some(raw) = &raw {
            let u = url::Url::parse(raw).map_err(|e| {
                ProviderError::Config(format!("model base URL '{raw}' is not a valid URL ({e}); write it like https://api.example.com/v1"))
            })?;
            if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
                return Err(ProviderError::Config(format!(
                    "model base URL '{raw}' must be an http:// or https:// URL with a host"
                )));
            }
        }
        raw
    };
    Ok(ResolvedModel {
        provider,
        name,
        base_url,
        provider_origin,
    })
}

/// Resolve one forge.yaml `model.fallbacks` entry: its provider and name as written (the name
/// defaulting to the provider's default); base URL from the entry, else the provider's `*_BASE_URL`
/// variable, else the default. `FORGE_MODEL_PROVIDER`/`MODEL_NAME` and the CLI flags apply to the
/// primary model only.
pub fn resolve_fallback(
    entry: &ModelSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedModel, ProviderError> {
    if nonempty(entry.provider.clone()).is_none() {
        return Err(ProviderError::Config("a model.fallbacks entry has no provider; write it like {provider: anthropic, name: claude-sonnet-4-20250514}".into()));
    }
    let scoped = |k: &str| match k {
        "FORGE_MODEL_PROVIDER" | "MODEL_NAME" => None,
        _ => env(k),
    };
    resolve_model(entry, None, None, &scoped)
}

impl ResolvedModel {
    /// The egress allowlist entry for the provider's endpoint (`api.openai.com`,
    /// `127.0.0.1:8080`), added automatically so model calls pass the agent's policy.
    pub fn egress_entry(&self) -> Option<String> {
        let u = url::Url::parse(self.base_url.as_deref()?).ok()?;
        let host = u.host_str()?.to_string();
        let default_port = match u.scheme() {
            "https" => 443,
            _ => 80,
        };
        match u.port() {
            Some(p) if p != default_port => Some(format!("{host}:{p}")),
            _ => Some(host),
        }
    }
}

/// Build the provider for `model`. `agent_dir` anchors the scripted provider's relative path.
pub fn build_provider(
    model: &ResolvedModel,
    agent_dir: &Path,
    http: Arc<dyn ModelHttp>,
    retry: RetryPolicy,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let base = || {
        // resolve_model validated the URL for every HTTP provider.
        model
            .base_url
            .as_deref()
            .and_then(|b| url::Url::parse(b).ok())
            .ok_or_else(|| ProviderError::Config(format!("{}: no base URL", model.provider)))
    };
    let key = |provider: &str| -> Result<Option<String>, ProviderError> {
        let var = key_env(provider).unwrap_or("");
        let key = nonempty(env(var));
        let custom = model.base_url.as_deref() != default_base_url(provider);
        if key.is_none() && !custom {
            return Err(ProviderError::Config(format!(
                "{provider}: no API key: set {var} (or point model.base_url at a server that needs none)"
            )));
        }
        Ok(key)
    };
    Ok(match model.provider.as_str() {
        "openai" => Arc::new(openai::OpenAi::new(
            "openai",
            &model.name,
            base()?,
            key("openai")?,
            "OPENAI_API_KEY",
            http,
            retry,
        )),
        // Ollama needs no key; one behind an authenticating proxy takes OPENAI_API_KEY.
        "ollama" => Arc::new(openai::OpenAi::new(
            "ollama",
            &model.name,
            base()?,
            nonempty(env("OPENAI_API_KEY")),
            "OPENAI_API_KEY",
            http,
            retry,
        )),
        "anthropic" => Arc::new(anthropic::Anthropic::new(
            &model.name,
            base()?,
            key("anthropic")?,
            http,
            retry,
        )),
        "scripted" => {
            let path = agent_dir.join(&model.name);
            Arc::new(scripted::Scripted::load(&path)?)
        }
        other => {
            return Err(ProviderError::Config(format!(
                "unknown model provider '{other}': known providers are {}",
                KNOWN_PROVIDERS.join(", ")
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    fn yaml(p: &str, n: &str) -> ModelSettings {
        ModelSettings {
            provider: Some(p.into()),
            name: Some(n.into()),
            base_url: None,
        }
    }

    #[test]
    fn cli_overrides_env_overrides_config() {
        let e = env_of(&[("FORGE_MODEL_PROVIDER", "anthropic")]);
        let r = resolve_model(&yaml("openai", "gpt-4o"), None, None, &e).unwrap();
        assert_eq!(r.provider, "anthropic");
        assert_eq!(
            r.name, "claude-sonnet-4-20250514",
            "yaml's openai model name is not carried over"
        );
        assert_eq!(r.provider_origin, Origin::Env);
        let r = resolve_model(
            &yaml("openai", "gpt-4o"),
            Some("scripted"),
            Some("s.yaml"),
            &e,
        )
        .unwrap();
        assert_eq!(
            (r.provider.as_str(), r.name.as_str(), r.base_url),
            ("scripted", "s.yaml", None)
        );
        let r = resolve_model(
            &yaml("openai", "gpt-4o"),
            None,
            None,
            &env_of(&[("MODEL_NAME", "gpt-5")]),
        )
        .unwrap();
        assert_eq!(r.name, "gpt-5");
    }

    #[test]
    fn the_readme_switch_from_scripted_to_openai_uses_the_default_model() {
        let r = resolve_model(
            &yaml("scripted", "demo-script.yaml"),
            Some("openai"),
            None,
            &env_of(&[]),
        )
        .unwrap();
        assert_eq!(r.provider, "openai");
        assert_eq!(
            r.name, "gpt-4o-mini",
            "the script path is not sent as a model name"
        );
        assert_eq!(r.egress_entry().as_deref(), Some("api.openai.com"));
    }

    #[test]
    fn fallbacks_ignore_the_primary_overrides() {
        let e = env_of(&[
            ("FORGE_MODEL_PROVIDER", "openai"),
            ("MODEL_NAME", "gpt-5"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:7/"),
        ]);
        let r = resolve_fallback(&yaml("anthropic", ""), &e).unwrap();
        assert_eq!(r.provider, "anthropic");
        assert_eq!(r.name, "claude-sonnet-4-20250514");
        assert_eq!(r.egress_entry().as_deref(), Some("127.0.0.1:7"));
        let err = resolve_fallback(&ModelSettings::default(), &e).unwrap_err();
        assert!(err.to_string().contains("has no provider"), "{err}");
    }

    #[test]
    fn api_keys_pick_the_provider_when_nothing_else_does() {
        let r = resolve_model(
            &ModelSettings::default(),
            None,
            None,
            &env_of(&[("ANTHROPIC_API_KEY", "k")]),
        )
        .unwrap();
        assert_eq!(
            (r.provider.as_str(), r.provider_origin),
            ("anthropic", Origin::ApiKey)
        );
        let both = env_of(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")]);
        assert_eq!(
            resolve_model(&ModelSettings::default(), None, None, &both)
                .unwrap()
                .provider,
            "openai"
        );
        let err = resolve_model(&ModelSettings::default(), None, None, &env_of(&[])).unwrap_err();
        assert!(
            err.to_string().contains("no model provider configured"),
            "{err}"
        );
    }

    #[test]
    fn base_url_from_config_then_env_then_default() {
        let e = env_of(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        let r = resolve_model(&yaml("openai", "m"), None, None, &e).unwrap();
        assert_eq!(r.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(r.egress_entry().as_deref(), Some("127.0.0.1:9"));
        let mut y = yaml("openai", "m");
        y.base_url = Some("https://openrouter.ai/api/v1".into());
        let r = resolve_model(&y, None, None, &e).unwrap();
        assert_eq!(r.egress_entry().as_deref(), Some("openrouter.ai"));
        let r = resolve_model(&yaml("ollama", "m"), None, None, &env_of(&[])).unwrap();
        assert_eq!(r.egress_entry().as_deref(), Some("localhost:11434"));
    }

    #[test]
    fn unknown_provider_and_bad_url_are_config_errors() {
        let err = resolve_model(&yaml("gemini", "x"), None, None, &env_of(&[])).unwrap_err();
        assert!(
            err.to_string().contains("unknown model provider 'gemini'"),
            "{err}"
        );
        let mut y = yaml("openai", "m");
        y.base_url = Some("ftp://x".into());
        assert!(resolve_model(&y, None, None, &env_of(&[])).is_err());
    }

    #[test]
    fn backoff_doubles_and_respects_retry_after_and_cap() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            ..Default::default()
        };
        let d0 = p.delay(0, None);
        let d2 = p.delay(2, None);
        assert!(d0 >= Duration::from_millis(100) && d0 <= Duration::from_millis(125));
        assert!(d2 >= Duration::from_millis(400) && d2 <= Duration::from_millis(500));
        assert_eq!(p.delay(10, None), Duration::from_secs(1));
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(60))),
            Duration::from_secs(1)
        );
    }
}
