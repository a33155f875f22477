//! `model.fallbacks`: a chain of providers tried in order. When the primary model fails (retries
//! exhausted, an HTTP error, an unauthorized key, a refusal by the egress policy, a response forge
//! cannot read), the next entry gets the same request; the first answer wins and says who served
//! it ([`ChatResponse::served_by`]). Cancellation stops the chain at once.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{ChatRequest, ChatResponse, Provider, ProviderError};

/// The primary provider followed by its fallbacks.
pub struct Fallback {
    /// Never empty: [`Fallback::new`] puts the primary first, so `chain[0]` always exists.
    chain: Vec<Arc<dyn Provider>>,
}

impl Fallback {
    /// `primary`, then `fallbacks` in order.
    pub fn new(primary: Arc<dyn Provider>, fallbacks: Vec<Arc<dyn Provider>>) -> Self {
        let mut chain = vec![primary];
        chain.extend(fallbacks);
        Self { chain }
    }
}

#[async_trait]
impl Provider for Fallback {
    fn name(&self) -> &str {
        self.chain[0].name()
    }
    fn model(&self) -> &str {
        self.chain[0].model()
    }
    fn host(&self) -> Option<String> {
        self.chain[0].host()
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let mut failures: Vec<(String, ProviderError)> = Vec::new();
        for (i, p) in self.chain.iter().enumerate() {
            match p.chat(req, cancel).await {
                Ok(mut r) => {
                    if i > 0 {
                        r.served_by = Some(format!("{}/{}", p.name(), p.model()));
                    }
                    return Ok(r);
                }
                Err(ProviderError::Cancelled) => return Err(ProviderError::Cancelled),
                Err(e) => {
                    if i + 1 < self.chain.len() {
                        tracing::warn!(
                            "{}/{} failed ({e}); trying the next model in model.fallbacks",
                            p.name(),
                            p.model()
                        );
                    }
                    failures.push((format!("{}/{}", p.name(), p.model()), e));
                }
            }
        }
        if failures.len() == 1 {
            // A chain of one: the original error, kind and message intact.
            if let Some((_, e)) = failures.pop() {
                return Err(e);
            }
        }
        Err(ProviderError::AllFailed(
            failures
                .iter()
                .map(|(who, e)| format!("{who}: {e}"))
                .collect::<Vec<_>>()
                .join("; "),
        ))
    }
}
