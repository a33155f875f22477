//! The model transport used by `forge run`: provider requests sent through the egress HTTP client
//! (`forge_egress::client::EgressClient`), so they obey the agent's egress policy like every other
//! outbound request. The runner adds the provider's host to the allowlist
//! ([`super::ResolvedModel::egress_entry`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use forge_egress::client::EgressClient;
use forge_egress::EgressError;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::{HttpReply, ModelHttp, TransportError};

/// [`ModelHttp`] over the egress client.
pub struct EgressTransport {
    client: Arc<EgressClient>,
}

impl EgressTransport {
    /// A transport sending through `client`.
    pub fn new(client: Arc<EgressClient>) -> Self {
        Self { client }
    }
}

#[async_trait]
impl ModelHttp for EgressTransport {
    async fn post_json(
        &self,
        url: &url::Url,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<HttpReply, TransportError> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| TransportError::Io(format!("bad header name {k}: {e}")))?;
            // Never echo a header value (it may be an API key) into an error message.
            let value = HeaderValue::from_str(v).map_err(|_| {
                TransportError::Io(format!("header {k} has a value that is not valid in HTTP"))
            })?;
            map.insert(name, value);
        }
        match self
            .client
            .request(Method::POST, url.as_str(), map, Bytes::from(body))
            .await
        {
            Ok(r) => {
                let retry_after = r
                    .headers
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                Ok(HttpReply {
                    status: r.status.as_u16(),
                    retry_after,
                    body: r.body.to_vec(),
                })
            }
            Err(e @ EgressError::Blocked(_)) => Err(TransportError::Blocked(e.to_string())),
            Err(e) => Err(TransportError::Io(e.to_string())),
        }
    }
}
