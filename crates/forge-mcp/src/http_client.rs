//! rmcp's streamable HTTP client transport over forge's egress client.
//!
//! [`EgressHttp`] implements rmcp's `StreamableHttpClient`, so every request to a remote MCP
//! server goes through [`forge_egress::client::EgressClient`]: the egress policy, the IP rule and
//! the validated dial apply exactly as they do to `http_request`. Invariants:
//! - Redirects are never followed: the client is built with `max_redirects: 0`, and a redirect
//!   answer becomes an error naming the location (a redirect could move the session, with its
//!   bearer token, to another host).
//! - Each response is read whole (the egress client buffers bodies, with its size limit), so an
//!   SSE answer to a POST is parsed once the server closes it, which servers do after the
//!   response. The standalone GET stream is not opened (`ServerDoesNotSupportSse`): forge needs no
//!   server-initiated requests from a tool server.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};

use forge_egress::client::EgressClient;
use forge_egress::EgressError;

const SESSION_HEADER: &str = "mcp-session-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// The error type of [`EgressHttp`]: the egress client's error, with redirects made explicit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressHttpError {
    /// The egress client refused or failed the request (policy refusals included).
    #[error("{0}")]
    Egress(EgressError),
    /// The server answered with a redirect, which forge does not follow for MCP servers.
    #[error("the MCP server answered with a redirect to {location}; forge does not follow redirects from MCP servers: put the final URL in forge.yaml")]
    Redirect { location: String },
    /// The request could not be built.
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// rmcp's HTTP backend over forge's egress client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EgressHttp {
    client: Arc<EgressClient>,
}

impl EgressHttp {
    /// `client` must be built with `max_redirects: 0` (see [`crate::client::connect`], which does).
    pub fn new(client: Arc<EgressClient>) -> Self {
        Self { client }
    }

    async fn send(
        &self,
        method: Method,
        uri: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<forge_egress::client::EgressResponse, StreamableHttpError<EgressHttpError>> {
        match self.client.request(method, uri, headers, body).await {
            Ok(r) => Ok(r),
            Err(EgressError::TooManyRedirects { location, .. }) => {
                Err(StreamableHttpError::Client(EgressHttpError::Redirect {
                    location,
                }))
            }
            Err(e) => Err(StreamableHttpError::Client(EgressHttpError::Egress(e))),
        }
    }
}

fn headers(
    auth: Option<String>,
    session: Option<&str>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> Result<HeaderMap, StreamableHttpError<EgressHttpError>> {
    let mut h = HeaderMap::new();
    for (k, v) in custom {
        h.insert(k, v);
    }
    if let Some(token) = auth {
        let v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            StreamableHttpError::Client(EgressHttpError::Invalid(
                "the bearer token contains characters not allowed in a header".into(),
            ))
        })?;
        h.insert(AUTHORIZATION, v);
    }
    if let Some(sid) = session {
        let v = HeaderValue::from_str(sid).map_err(|_| {
            StreamableHttpError::Client(EgressHttpError::Invalid("invalid session id".into()))
        })?;
        h.insert(HeaderName::from_static(SESSION_HEADER), v);
    }
    Ok(h)
}

fn media_type_is(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(expected))
}

impl StreamableHttpClient for EgressHttp {
    type Error = EgressHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let body = serde_json::to_vec(&message)?;
        let mut h = headers(auth_header, session_id.as_deref(), custom_headers)?;
        h.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let resp = self.send(Method::POST, &uri, h, Bytes::from(body)).await?;
        let status = resp.status;
        if status == StatusCode::UNAUTHORIZED {
            let challenge = resp
                .headers
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("Bearer")
                .to_string();
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                challenge,
            )));
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = resp
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            if media_type_is(&resp.headers, JSON) {
                if let Ok(m @ JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&resp.body)
                {
                    return Ok(StreamableHttpPostResponse::Json(m, session));
                }
            }
            let text = String::from_utf8_lossy(&resp.body[..resp.body.len().min(512)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {text}"),
            )));
        }
        if resp.body.is_empty() && awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if media_type_is(&resp.headers, EVENT_STREAM) {
            let stream = sse_stream::SseStream::new(http_body_util::Full::new(resp.body));
            let boxed: BoxStream<'static, Result<sse_stream::Sse, SseError>> = stream.boxed();
            return Ok(StreamableHttpPostResponse::Sse(boxed, session));
        }
        if media_type_is(&resp.headers, JSON) {
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&resp.body) {
                Ok(m) => Ok(StreamableHttpPostResponse::Json(m, session)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("the server's JSON answer is not JSON-RPC: {e}"),
                ))),
            };
        }
        if awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            resp.headers
                .get(CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let h = headers(auth_header, Some(&session_id), custom_headers)?;
        let resp = self.send(Method::DELETE, &uri, h, Bytes::new()).await?;
        if resp.status.is_success() || resp.status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("deleting the session returned HTTP {}", resp.status),
        )))
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        // forge does not open the standalone server-to-client stream (see the module comment).
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
