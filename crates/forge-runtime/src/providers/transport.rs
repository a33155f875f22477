//! The model transport used by `forge run`: provider requests sent through the egress HTTP client
//! (`forge_egress::client::EgressClient`), so they obey the agent's egress policy like every other
//! outbound request. The runner adds the provider's host to the allowlist
//! ([`super::ResolvedModel::egress_entry`]).

use std::sync::Arc;

use async_trait::async_trait;

use super::{HttpReply, ModelHttp, TransportError};

/// [`ModelHttp`] over the egress client.
pub struct EgressTransport {
    #[allow(dead_code)] // used once the egress client's request API lands
    client: Arc<forge_egress::client::EgressClient>,
}

impl EgressTransport {
    /// A transport sending through `client`.
    pub fn new(client: Arc<forge_egress::client::EgressClient>) -> Self {
        Self { client }
    }
}

#[async_trait]
impl ModelHttp for EgressTransport {
    async fn post_json(&self, url: &url::Url, _headers: &[(String, String)], _body: Vec<u8>) -> Result<HttpReply, TransportError> {
        // Adapter pending: the egress client's request API is not in forge-egress yet.
        Err(TransportError::Io(format!(
            "cannot reach {url}: the egress HTTP client is not available in this build yet"
        )))
    }
}
