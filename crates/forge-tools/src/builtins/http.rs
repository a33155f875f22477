//! `http_request` and `web_fetch`: HTTP through the agent's egress client (the one policy, with
//! redirects re-validated by the client), with a body size cap, and the response body fenced as
//! untrusted outside content before the model sees it. A PDF response (`application/pdf`, or a
//! body starting `%PDF-`) is read with [`crate::pdf`] and shown as its text, page by page under
//! the tool's size budget, with a `page` argument to read on.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::html_text::html_to_text;
use crate::fence;
use crate::pdf::{read_pdf, render_parts, PdfLimits, PdfText};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Default cap on the response body bytes read by `http_request`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// Largest cap a caller may ask for.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// Largest request body accepted.
pub const MAX_REQUEST_BODY_BYTES: usize = 5 * 1024 * 1024;
/// Default per-request time limit (when the call has none).
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// `web_fetch`: default and largest number of characters returned per call.
pub const WEB_FETCH_DEFAULT_CHARS: usize = 20_000;
pub const WEB_FETCH_MAX_CHARS: usize = 100_000;
/// `web_fetch` reads at most this many bytes of the page.
pub const WEB_FETCH_MAX_BYTES: usize = 5 * 1024 * 1024;

/// Response headers worth showing the model (others are dropped).
const SHOWN_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "location",
    "last-modified",
    "etag",
    "cache-control",
    "retry-after",
    "www-authenticate",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "link",
];

/// One request, as the tools build it.
#[derive(Debug, Clone)]
pub struct HttpCall {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub max_body_bytes: usize,
    pub timeout: Duration,
    /// Names of headers that carry a secret: marked sensitive, so the client drops them on any
    /// redirect to another origin.
    pub sensitive: Vec<String>,
    /// A PDF response is kept whole (up to the client's own body limit) rather than cut at
    /// `max_body_bytes`: a cut PDF cannot be read, and its text is cut by pages instead.
    pub whole_pdf: bool,
}

/// What came back.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    pub final_url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than the cap and was cut.
    pub truncated: bool,
}

/// Send `call` through the egress client. This is the one place the builtins touch the client API.
///
/// The client reads at most its own body limit (10 MiB by default; a larger body is an error);
/// the body is then cut to `call.max_body_bytes` and marked truncated.
pub async fn send(ctx: &ToolContext, call: HttpCall) -> Result<HttpReply, ToolError> {
    let Some(client) = ctx.egress.as_ref() else {
        return Err(ToolError::Failed(
            "no egress client in this context: network tools run only inside an assembled agent"
                .into(),
        ));
    };
    let method = http::Method::from_bytes(call.method.as_bytes())
        .map_err(|_| ToolError::InvalidInput(format!("`method` {:?} is not valid", call.method)))?;
    let mut headers = http::HeaderMap::new();
    for (k, v) in &call.headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| ToolError::InvalidInput(format!("{k:?} is not a valid header name")))?;
        let mut value = http::HeaderValue::from_str(v).map_err(|_| {
            ToolError::InvalidInput(format!("the value of header {k:?} is not valid"))
        })?;
        if call.sensitive.iter().any(|s| s.eq_ignore_ascii_case(k)) {
            value.set_sensitive(true);
        }
        headers.append(name, value);
    }
    let body = bytes::Bytes::from(call.body.unwrap_or_default());
    let request = client.request(method, &call.url, headers, body);
    let resp = tokio::select! {
        r = tokio::time::timeout(call.timeout, request) => match r {
            Ok(r) => r.map_err(egress_error)?,
            Err(_) => return Err(ToolError::Timeout(call.timeout)),
        },
        _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
    };
    let mut body = resp.body.to_vec();
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let content_type = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let keep_whole = call.whole_pdf && is_pdf(content_type, &body);
    let truncated = !keep_whole && body.len() > call.max_body_bytes;
    if !keep_whole {
        body.truncate(call.max_body_bytes);
    }
    Ok(HttpReply {
        status: resp.status.as_u16(),
        final_url: resp.url,
        headers,
        body,
        truncated,
    })
}

/// Map an egress error to what the model sees; a policy refusal keeps its exact wording.
fn egress_error(e: forge_egress::EgressError) -> ToolError {
    match &e {
        forge_egress::EgressError::Blocked(r) => ToolError::Blocked(r.clone()),
        forge_egress::EgressError::Timeout { after, .. } => ToolError::Timeout(*after),
        forge_egress::EgressError::BodyTooLarge { limit } => ToolError::Failed(format!(
            "the response body is larger than {limit} bytes, more than forge reads; request a smaller resource"
        )),
        _ => ToolError::Failed(e.to_string()),
    }
}

/// Replace each `{{secret:NAME}}` in header values with the secret's value, when the request's
/// origin is one the secret is bound to; otherwise refuse before anything is sent. Returns the
/// names of the headers that now carry a secret (sent marked sensitive), and records each use.
fn substitute_secrets(
    ctx: &ToolContext,
    url: &str,
    headers: &mut [(String, String)],
) -> Result<Vec<String>, ToolError> {
    const OPEN: &str = "{{secret:";
    let mut sensitive = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for (k, v) in headers.iter_mut() {
        if !v.contains(OPEN) {
            continue;
        }
        let target = crate::secrets::BoundOrigin::of_url(url).ok_or_else(|| {
            ToolError::InvalidInput(format!("cannot tell the origin of {url:?}; secrets are sent only to http(s) hosts they are bound to"))
        })?;
        let mut out = String::new();
        let mut rest = v.as_str();
        while let Some(i) = rest.find(OPEN) {
            out.push_str(&rest[..i]);
            let after = &rest[i + OPEN.len()..];
            let Some(j) = after.find("}}") else {
                return Err(ToolError::InvalidInput(format!(
                    "header {k:?}: `{{{{secret:` is not closed; write {{{{secret:NAME}}}}"
                )));
            };
            let name = after[..j].trim();
            let Some(secret) = ctx.secrets.get(name) else {
                return Err(ToolError::InvalidInput(format!(
                    "header {k:?} names secret {name:?}, which this agent does not have; its secrets: {}",
                    ctx.secrets.names()
                )));
            };
            if !secret.allows_request_to(&target) {
                return Err(ToolError::Failed(format!(
                    "refused: secret {name} may be sent only to {}, and this request goes to {}://{}:{}; nothing was sent",
                    secret.bindings(),
                    target.scheme,
                    target.host,
                    target.port
                )));
            }
            out.push_str(secret.value.expose());
            if !used.iter().any(|u| u == name) {
                used.push(name.to_string());
            }
            rest = &after[j + 2..];
        }
        out.push_str(rest);
        *v = out;
        sensitive.push(k.clone());
    }
    if let Some(target) = crate::secrets::BoundOrigin::of_url(url).filter(|_| !used.is_empty()) {
        for name in &used {
            ctx.secrets.record_use(
                ctx.task_id.as_deref(),
                name,
                &target.to_string(),
                "http_request",
            );
        }
    }
    Ok(sensitive)
}

fn header_value(reply: &HttpReply, name: &str) -> Option<String> {
    reply
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

/// A PDF: the media type says so (`application/pdf`, `application/x-pdf`), or the body starts
/// with the `%PDF-` header whatever the type says.
pub fn is_pdf(content_type: &str, body: &[u8]) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    (!body.is_empty() && matches!(media.as_str(), "application/pdf" | "application/x-pdf"))
        || body.starts_with(b"%PDF-")
}

/// A PDF response as a tool shows it.
struct PdfShown {
    doc: PdfText,
    /// The title line and page sections (outside content: fenced by the caller).
    text: String,
    /// forge's own "read on with page: N" line, when pages were left out (not fenced).
    note: Option<String>,
    next: Option<usize>,
}

/// Read a PDF response for a tool: its text from page `from_page` within `budget` bytes, with
/// every secret value redacted before the text is cut (a cut could split a value, which the call
/// path's redactor would then miss). A PDF that cannot be read is a tool error naming the URL.
async fn pdf_text(
    ctx: &ToolContext,
    url: &str,
    body: Vec<u8>,
    from_page: usize,
    budget: usize,
) -> Result<PdfShown, ToolError> {
    let mut doc = read_pdf(body, &PdfLimits::default()).await.map_err(|e| {
        ToolError::Failed(format!("{url} returned a PDF that forge cannot read: {e}"))
    })?;
    if !ctx.secrets.is_empty() {
        if let Some(t) = doc.title.as_mut() {
            *t = ctx.secrets.redact(t).into_owned();
        }
        for page in &mut doc.pages {
            *page = ctx.secrets.redact(page).into_owned();
        }
    }
    let (text, note, next) = render_parts(&doc, from_page, budget);
    Ok(PdfShown {
        doc,
        text,
        note,
        next,
    })
}

/// The `page` argument: 1-based, 1 when absent.
fn page_arg(input: &Value) -> Result<usize, ToolError> {
    match input.get("page") {
        None | Some(Value::Null) => Ok(1),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => Err(ToolError::InvalidInput(
                "`page` must be a whole number from 1 (the PDF page to read from)".into(),
            )),
        },
    }
}

fn is_textual(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.is_empty()
        || ct.starts_with("text/")
        || ct.contains("json")
        || ct.contains("xml")
        || ct.contains("javascript")
        || ct.contains("x-www-form-urlencoded")
        || ct.contains("yaml")
}

fn parse_url(url: &str) -> Result<(), ToolError> {
    let lower = url.trim().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(ToolError::InvalidInput(format!(
            "`url` must be an http:// or https:// URL, got {url:?}"
        )));
    }
    Ok(())
}

/// The `http_request` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct HttpRequest;

#[async_trait]
impl Tool for HttpRequest {
    fn name(&self) -> &str {
        "http_request"
    }

    fn description(&self) -> &str {
        "Send an HTTP request (GET, POST, PUT, PATCH, DELETE, HEAD) to a host in this agent's egress \
         allowlist. Returns the status, the final URL after redirects, selected headers and the body \
         (fenced as untrusted content, cut at max_bytes). A \"blocked by egress policy\" error means \
         the host is not allowed. A header value may name a secret as {{secret:NAME}} (the system \
         prompt lists them): forge inserts the value only for the hosts that secret is bound to. \
         A PDF response is shown as its text page by page (max_bytes is then the text budget); \
         `page` reads on from a later page."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"], "default": "GET"},
                "url": {"type": "string", "description": "http:// or https:// URL"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"description": "request body: a string, or any JSON value (sent as application/json)"},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BODY_BYTES, "default": DEFAULT_MAX_BODY_BYTES},
                "page": {"type": "integer", "minimum": 1, "default": 1, "description": "for a PDF response: the page to show text from"}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let url = input
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`url` (a string) is required".into()))?
            .trim()
            .to_string();
        parse_url(&url)?;
        let method = input
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET")
            .to_ascii_uppercase();
        if !matches!(
            method.as_str(),
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"
        ) {
            return Err(ToolError::InvalidInput(format!(
                "`method` {method:?} is not supported"
            )));
        }
        let mut headers = Vec::new();
        match input.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(_) | Value::Bool(_) => v.to_string(),
                        _ => {
                            return Err(ToolError::InvalidInput(format!(
                                "header {k:?} must be a string"
                            )))
                        }
                    };
                    if k.is_empty()
                        || !k
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b))
                    {
                        return Err(ToolError::InvalidInput(format!(
                            "{k:?} is not a valid header name"
                        )));
                    }
                    if v.contains(['\r', '\n', '\0']) {
                        return Err(ToolError::InvalidInput(format!(
                            "header {k:?} contains a line break"
                        )));
                    }
                    let lk = k.to_ascii_lowercase();
                    if matches!(
                        lk.as_str(),
                        "host" | "content-length" | "transfer-encoding" | "connection"
                    ) || lk.starts_with("proxy-")
                    {
                        return Err(ToolError::InvalidInput(format!(
                            "header {k:?} is set by forge and cannot be given"
                        )));
                    }
                    headers.push((k.clone(), v));
                }
            }
            Some(_) => {
                return Err(ToolError::InvalidInput(
                    "`headers` must be an object of strings".into(),
                ))
            }
        }
        let body = match input.get("body") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
            Some(v) => {
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("content-type".into(), "application/json".into()));
                }
                Some(v.to_string().into_bytes())
            }
        };
        if body
            .as_ref()
            .is_some_and(|b| b.len() > MAX_REQUEST_BODY_BYTES)
        {
            return Err(ToolError::InvalidInput(format!(
                "`body` is larger than {MAX_REQUEST_BODY_BYTES} bytes"
            )));
        }
        let max_body_bytes = match input.get("max_bytes").and_then(Value::as_u64) {
            Some(n) if n >= 1 => (n as usize).min(MAX_BODY_BYTES),
            _ => DEFAULT_MAX_BODY_BYTES,
        };
        let page = page_arg(&input)?;
        let timeout = ctx.timeout.unwrap_or(DEFAULT_HTTP_TIMEOUT);
        let sensitive = substitute_secrets(ctx, &url, &mut headers)?;
        let mut reply = send(
            ctx,
            HttpCall {
                method: method.clone(),
                url: url.clone(),
                headers,
                body,
                max_body_bytes,
                timeout,
                sensitive,
                whole_pdf: true,
            },
        )
        .await?;

        let content_type = header_value(&reply, "content-type").unwrap_or_default();
        let mut pdf_info = None;
        let mut pdf_note = None;
        let body_text = if reply.body.is_empty() {
            String::new()
        } else if is_pdf(&content_type, &reply.body) {
            let body = std::mem::take(&mut reply.body);
            let shown = pdf_text(ctx, &reply.final_url, body, page, max_body_bytes).await?;
            pdf_info = Some(json!({
                "title": shown.doc.title,
                "page_count": shown.doc.page_count,
                "from_page": page,
                "next_page": shown.next,
            }));
            pdf_note = shown.note;
            shown.text
        } else if is_textual(&content_type) || std::str::from_utf8(&reply.body).is_ok() {
            let text = String::from_utf8_lossy(&reply.body);
            if reply.truncated {
                // A secret the server echoed may be cut in two by max_bytes: the call path's
                // redactor sees only whole values, so the cut start is hidden here.
                ctx.secrets.redact_cut(&text).into_owned()
            } else {
                text.into_owned()
            }
        } else {
            format!(
                "[binary body: {} bytes of {content_type}; not shown]",
                reply.body.len()
            )
        };
        let note = format!(
            "source=http_request url={} status={}",
            reply.final_url, reply.status
        );
        let fenced = if body_text.is_empty() {
            String::new()
        } else {
            fence::wrap(&note, &body_text)
        };
        let shown: serde_json::Map<String, Value> = reply
            .headers
            .iter()
            .filter(|(k, _)| SHOWN_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
            .map(|(k, v)| (k.to_ascii_lowercase(), Value::String(v.clone())))
            .collect();
        let mut text = format!(
            "HTTP {} {}\nfinal_url: {}\n",
            reply.status, method, reply.final_url
        );
        if reply.truncated {
            text.push_str(&format!("[body cut at {max_body_bytes} bytes; pass a larger max_bytes (up to {MAX_BODY_BYTES}) for more]\n"));
        }
        text.push('\n');
        // Header values come from the server as much as the body does: the model sees them inside
        // the same fence, neutralised like the body, never as loose text next to it.
        let mut outside = String::new();
        for (k, v) in &shown {
            outside.push_str(&format!("{k}: {}\n", v.as_str().unwrap_or_default()));
        }
        if !body_text.is_empty() {
            if !outside.is_empty() {
                outside.push('\n');
            }
            outside.push_str(&body_text);
        }
        if !outside.is_empty() {
            text.push_str(&fence::wrap(&note, &outside));
        }
        if let Some(more) = pdf_note {
            text.push_str(&more);
        }
        let data = json!({
            "status": reply.status,
            "url": reply.final_url,
            "headers": shown,
            "body": fenced,
            "truncated": reply.truncated,
            "pdf": pdf_info,
        });
        Ok(ToolOutput {
            text,
            data: Some(data),
        })
    }
}

/// The `web_fetch` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct WebFetch;

#[async_trait]
impl Tool for WebFetch {
    fn name(&self) -> &str {
        "web_fetch"
    }

    fn description(&self) -> &str {
        "Fetch a web page (GET, through the egress policy) and return it as readable text (scripts and \
         styles removed, links as `text (url)`), fenced as untrusted content and paginated: a \
         \"pass offset=N for more\" line says how to continue. A PDF is shown as its text page by \
         page (max_chars is then the text budget in bytes); a \"read on with page: N\" line says how \
         to continue. No JavaScript runs; use the browser tools for pages that need it."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "max_chars": {"type": "integer", "minimum": 100, "maximum": WEB_FETCH_MAX_CHARS, "default": WEB_FETCH_DEFAULT_CHARS},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "page": {"type": "integer", "minimum": 1, "default": 1, "description": "for a PDF: the page to show text from"}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let url = input
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`url` (a string) is required".into()))?
            .trim()
            .to_string();
        parse_url(&url)?;
        let max_chars = input
            .get("max_chars")
            .and_then(Value::as_u64)
            .map(|n| (n as usize).clamp(100, WEB_FETCH_MAX_CHARS))
            .unwrap_or(WEB_FETCH_DEFAULT_CHARS);
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
        let page = page_arg(&input)?;
        let timeout = ctx.timeout.unwrap_or(DEFAULT_HTTP_TIMEOUT);
        let reply = send(
            ctx,
            HttpCall {
                method: "GET".into(),
                url: url.clone(),
                headers: vec![(
                    "accept".into(),
                    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5".into(),
                )],
                body: None,
                max_body_bytes: WEB_FETCH_MAX_BYTES,
                timeout,
                sensitive: Vec::new(),
                whole_pdf: true,
            },
        )
        .await?;
        let content_type = header_value(&reply, "content-type").unwrap_or_default();
        if is_pdf(&content_type, &reply.body) {
            let shown = pdf_text(ctx, &reply.final_url, reply.body, page, max_chars).await?;
            let note = format!(
                "source=web_fetch url={} status={}",
                reply.final_url, reply.status
            );
            let mut out = format!("HTTP {} final_url: {}\n", reply.status, reply.final_url);
            out.push_str(&fence::wrap(&note, &shown.text));
            if let Some(more) = &shown.note {
                out.push_str(more);
            }
            let data = json!({
                "status": reply.status,
                "url": reply.final_url,
                "content_type": content_type,
                "pdf": {
                    "title": shown.doc.title,
                    "page_count": shown.doc.page_count,
                    "from_page": page,
                    "next_page": shown.next,
                },
            });
            return Ok(ToolOutput {
                text: out,
                data: Some(data),
            });
        }
        let raw = String::from_utf8_lossy(&reply.body);
        let lower_ct = content_type.to_ascii_lowercase();
        let (title, text) = if lower_ct.contains("html")
            || (lower_ct.is_empty() && raw.trim_start().starts_with('<'))
        {
            html_to_text(&raw)
        } else if is_textual(&content_type) {
            (None, raw.into_owned())
        } else {
            // The header is the server's text and this error is not fenced: name the media type only.
            let media_type: String = content_type
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-/".contains(*c))
                .take(100)
                .collect();
            return Err(ToolError::Failed(format!(
                "{} returned {media_type:?}, which is not text; use http_request to see its headers",
                reply.final_url
            )));
        };
        let total = text.chars().count();
        let page: String = text.chars().skip(offset).take(max_chars).collect();
        let end = offset + page.chars().count();
        let mut content = String::new();
        if let Some(t) = &title {
            content.push_str(&format!("Title: {t}\n\n"));
        }
        content.push_str(&page);
        let note = format!(
            "source=web_fetch url={} status={}",
            reply.final_url, reply.status
        );
        let mut out = format!("HTTP {} final_url: {}\n", reply.status, reply.final_url);
        out.push_str(&fence::wrap(&note, &content));
        if end < total {
            out.push_str(&format!(
                "\n[showing characters {offset}..{end} of {total}; pass offset={end} for more]"
            ));
        } else if reply.truncated {
            out.push_str(&format!(
                "\n[the page was cut at {WEB_FETCH_MAX_BYTES} bytes]"
            ));
        }
        let data = json!({
            "status": reply.status,
            "url": reply.final_url,
            "content_type": content_type,
            "offset": offset,
            "next_offset": if end < total { Some(end) } else { None },
            "total_chars": total,
        });
        Ok(ToolOutput {
            text: out,
            data: Some(data),
        })
    }
}
