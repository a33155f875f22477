//! forge.yaml `a2a:` (how task results go out over A2A):
//!
//! ```yaml
//! a2a:
//!   inline_artifact_bytes: 262144   # files up to this size also go inline (base64) in the task
//! ```
//!
//! Read with the browser block's [`Reader`] (each bad value a diagnostic pointing at it).

use serde::{Deserialize, Serialize};

use crate::browser::Reader;
use crate::yaml::Seg;

/// Default `a2a.inline_artifact_bytes` (256 KiB).
pub const DEFAULT_INLINE_ARTIFACT_BYTES: u64 = 256 * 1024;
/// Largest `a2a.inline_artifact_bytes` (4 MiB: inline bytes grow every `tasks/get` answer).
pub const MAX_INLINE_ARTIFACT_BYTES: u64 = 4 * 1024 * 1024;

const A2A_KEYS: &[&str] = &["inline_artifact_bytes"];

/// `a2a`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct A2aSettings {
    /// Files a task writes up to this size are also sent inline (base64) in the task's artifact,
    /// next to the `http(s)` URI; 0 never inlines. Default [`DEFAULT_INLINE_ARTIFACT_BYTES`].
    pub inline_artifact_bytes: u64,
}

impl Default for A2aSettings {
    fn default() -> Self {
        Self {
            inline_artifact_bytes: DEFAULT_INLINE_ARTIFACT_BYTES,
        }
    }
}

/// Read `a2a` with `r` (its errors and warnings stay in `r`).
pub(crate) fn read(r: &mut Reader<'_, '_>) -> A2aSettings {
    let mut out = A2aSettings::default();
    let base = [Seg::Key("a2a")];
    if !r.section(&base, "a2a", "a2a: {inline_artifact_bytes: 262144}") {
        return out;
    }
    r.unknown_keys(&base, A2A_KEYS, "a2a");
    if let Some(n) = r.number(
        &[Seg::Key("a2a"), Seg::Key("inline_artifact_bytes")],
        "a2a.inline_artifact_bytes",
        0,
        MAX_INLINE_ARTIFACT_BYTES,
        "262144",
    ) {
        out.inline_artifact_bytes = n;
    }
    out
}
