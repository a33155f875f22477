//! Login profiles: forge.yaml `browser.profiles` kept in the state store, sealed with
//! XChaCha20-Poly1305 before they get there.
//!
//! - The key ([`ProfileKey`]): `FORGE_PROFILE_KEY` (32 bytes written as 64 hex digits or as
//!   base64), else the file named by `FORGE_PROFILE_KEY_FILE` (the same text; a Kubernetes
//!   Secret mount). Both set is refused (which one is meant?). A malformed key stops startup of
//!   an agent that has profiles. No key: a task naming a profile is refused (nothing is ever
//!   kept in the clear).
//! - Sealing: a random 24-byte nonce per save, the profile's name as associated data (a row
//!   copied under another name does not open), the key's fingerprint (`sha256:` + 16 hex digits
//!   of SHA-256 over a label and the key; never the key) stored beside it, so a wrong key is
//!   named as such rather than as corruption.
//! - [`Profiles`]: load (decrypt, filter to the profile's origins) and save (filter, seal,
//!   optimistic version check) against the store (forge.yaml `state.url` / `FORGE_STATE_URL`,
//!   else `.forge/state.db`; the runner opens it at start when forge.yaml has profiles).
//! - Two tasks with one profile at once: both start from the saved state; each save names the
//!   version its task loaded, so the first to end saves and the second's save is refused (its
//!   changes are dropped, audited as `profile_save` with `saved: false` and the reason).

use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use forge_browser::{ProfileOrigin, ProfileState};
use forge_skills::ProfileSpec;
use forge_state::{ProfileRecord, ProfileSave, StateError, StateStore};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The environment variable holding the key.
pub const PROFILE_KEY_ENV: &str = "FORGE_PROFILE_KEY";
/// The environment variable naming a file holding the key.
pub const PROFILE_KEY_FILE_ENV: &str = "FORGE_PROFILE_KEY_FILE";
/// Largest sealed profile kept (cookies and local storage of its origins).
pub const MAX_PROFILE_BYTES: usize = 4 << 20;

const AAD_LABEL: &str = "forge login profile v1: ";

/// The profiles' encryption key. Its bytes are zeroed on drop and never printed.
pub struct ProfileKey {
    key: Zeroizing<[u8; 32]>,
    id: String,
}

impl std::fmt::Debug for ProfileKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProfileKey({})", self.id)
    }
}

impl ProfileKey {
    /// Parse 64 hex digits or base64 of 32 bytes (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<ProfileKey, String> {
        use base64::Engine;
        let t = text.trim();
        let bytes: Zeroizing<Vec<u8>> = if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())
        {
            Zeroizing::new(hex::decode(t).map_err(|e| e.to_string())?)
        } else {
            let engines = [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            match engines.iter().find_map(|e| e.decode(t).ok()) {
                Some(b) => Zeroizing::new(b),
                None => {
                    return Err(
                        "it is neither 64 hex digits nor base64 (generate one with `openssl rand -hex 32`)"
                            .into(),
                    )
                }
            }
        };
        if bytes.len() != 32 {
            return Err(format!(
                "it is {} bytes, and the key is 32 bytes (generate one with `openssl rand -hex 32`)",
                bytes.len()
            ));
        }
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&bytes);
        let mut h = Sha256::new();
        h.update(b"forge profile key fingerprint v1\0");
        h.update(key.as_slice());
        let id = format!("sha256:{}", &hex::encode(h.finalize())[..16]);
        Ok(ProfileKey { key, id })
    }

    /// The key from the environment: `Ok(None)` when neither variable is set.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<ProfileKey>, String> {
        let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        match (set(PROFILE_KEY_ENV), set(PROFILE_KEY_FILE_ENV)) {
            (Some(_), Some(_)) => Err(format!(
                "both {PROFILE_KEY_ENV} and {PROFILE_KEY_FILE_ENV} are set; set only one"
            )),
            (Some(v), None) => {
                let v = Zeroizing::new(v);
                ProfileKey::parse(&v)
                    .map(Some)
                    .map_err(|e| format!("{PROFILE_KEY_ENV} is not a profile key: {e}"))
            }
            (None, Some(path)) => {
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    format!("{PROFILE_KEY_FILE_ENV}={path}: cannot read the key file: {e}")
                })?;
                let text = Zeroizing::new(text);
                ProfileKey::parse(&text).map(Some).map_err(|e| {
                    format!("{PROFILE_KEY_FILE_ENV}={path} does not hold a profile key: {e}")
                })
            }
            (None, None) => Ok(None),
        }
    }

    /// The key's fingerprint (`sha256:` + 16 hex digits).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.key.as_slice().into())
    }

    /// Seal `plain` for profile `name`: (nonce, ciphertext).
    pub fn seal(&self, name: &str, plain: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let nonce: [u8; 24] = rand::random();
        let aad = format!("{AAD_LABEL}{name}");
        let ct = self
            .cipher()
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| "encryption failed".to_string())?;
        Ok((nonce.to_vec(), ct))
    }

    /// Open what [`ProfileKey::seal`] made for `name`; `None` when it does not open (another
    /// key, another name, altered bytes).
    pub fn open(&self, name: &str, nonce: &[u8], ct: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        if nonce.len() != 24 {
            return None;
        }
        let aad = format!("{AAD_LABEL}{name}");
        self.cipher()
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: aad.as_bytes(),
                },
            )
            .ok()
            .map(Zeroizing::new)
    }
}

/// Why a profile could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The task names a profile forge.yaml does not have.
    #[error("there is no login profile `{name}` in forge.yaml browser.profiles (known: {known}); add `{name}: {{origins: [\"https://...\"]}}` under browser.profiles, or name one of those")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The configured names.
        known: String,
    },
    /// The agent has no browser.
    #[error("login profile `{0}` needs the browser, and this agent has none (no active skill requires the browser capability)")]
    NoBrowser(String),
    /// No key is set.
    #[error("login profile `{0}` cannot be used: no profile key is set, and forge never keeps profiles unencrypted; set FORGE_PROFILE_KEY to 32 random bytes as 64 hex digits or base64 (`openssl rand -hex 32`), or FORGE_PROFILE_KEY_FILE to a file holding one; every replica needs the same key")]
    NoKey(String),
    /// The key in use is not the one the profile was saved with.
    #[error("login profile `{name}` was saved with profile key {stored}, and the key set now (FORGE_PROFILE_KEY / FORGE_PROFILE_KEY_FILE) is {current}; set the key it was saved with, or delete the profile (`forge profile delete {name}`) and log in again")]
    WrongKey {
        /// The profile.
        name: String,
        /// The fingerprint stored with it.
        stored: String,
        /// The fingerprint of the key in use.
        current: String,
    },
    /// The stored profile does not open with the right key (altered or corrupt).
    #[error("login profile `{0}` does not decrypt with its key: the stored bytes were altered or are corrupt; delete it (`forge profile delete {0}`) and log in again")]
    Corrupt(String),
    /// Too large to keep.
    #[error("login profile `{name}` would be {size} bytes, over the limit of {limit}; it was not saved (a site keeping that much in cookies and local storage is not a login)")]
    TooLarge {
        /// The profile.
        name: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The store failed.
    #[error("login profile `{name}`: {source}")]
    Store {
        /// The profile.
        name: String,
        /// What the store said.
        source: StateError,
    },
}

/// A profile as a task loaded it: what to restore and the version to save against.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    /// The profile's name.
    pub name: String,
    /// Its origins.
    pub origins: Vec<ProfileOrigin>,
    /// The saved state (empty for a profile never saved).
    pub state: ProfileState,
    /// The stored version it was read at (`None`: not saved yet).
    pub version: Option<i64>,
    /// Local storage of profile origins the task's tabs showed, as last read (after each
    /// browser call).
    pub seen_storage: std::collections::BTreeMap<String, Vec<(String, String)>>,
}

/// The agent's login profiles: its forge.yaml entries, the key and the store.
pub struct Profiles {
    specs: Vec<ProfileSpec>,
    key: Option<ProfileKey>,
    store: Arc<dyn StateStore>,
}

impl Profiles {
    /// The profiles of forge.yaml `specs`, sealed with `key`, kept in `store`.
    pub fn new(
        specs: Vec<ProfileSpec>,
        key: Option<ProfileKey>,
        store: Arc<dyn StateStore>,
    ) -> Self {
        Self { specs, key, store }
    }

    /// The configured profiles.
    pub fn specs(&self) -> &[ProfileSpec] {
        &self.specs
    }

    /// The store the profiles are kept in.
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    fn spec(&self, name: &str) -> Result<&ProfileSpec, ProfileError> {
        self.specs
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ProfileError::Unknown {
                name: name.to_string(),
                known: match self.specs.is_empty() {
                    true => "none".into(),
                    false => self
                        .specs
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                },
            })
    }

    /// Check that a task may use profile `name` (configured, a key set), before it starts.
    pub fn check(&self, name: &str) -> Result<(), ProfileError> {
        self.spec(name)?;
        if self.key.is_none() {
            return Err(ProfileError::NoKey(name.to_string()));
        }
        Ok(())
    }

    /// Load profile `name`: its saved state (decrypted, filtered to its origins) and version.
    pub async fn load(&self, name: &str) -> Result<LoadedProfile, ProfileError> {
        let spec = self.spec(name)?;
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| ProfileError::NoKey(name.to_string()))?;
        let origins: Vec<ProfileOrigin> = spec
            .origins
            .iter()
            .filter_map(|o| ProfileOrigin::parse(o))
            .collect();
        let store_err = |source| ProfileError::Store {
            name: name.to_string(),
            source,
        };
        let store = &self.store;
        let Some(rec) = store.profile(name).await.map_err(store_err)? else {
            return Ok(LoadedProfile {
                name: name.to_string(),
                origins,
                state: ProfileState::default(),
                version: None,
                seen_storage: Default::default(),
            });
        };
        if rec.key_id != key.id() {
            return Err(ProfileError::WrongKey {
                name: name.to_string(),
                stored: rec.key_id,
                current: key.id().to_string(),
            });
        }
        let plain = key
            .open(name, &rec.nonce, &rec.ciphertext)
            .ok_or_else(|| ProfileError::Corrupt(name.to_string()))?;
        let state: ProfileState =
            serde_json::from_slice(&plain).map_err(|_| ProfileError::Corrupt(name.to_string()))?;
        let _ = store.touch_profile(name).await;
        Ok(LoadedProfile {
            name: name.to_string(),
            state: state.only(&origins),
            origins,
            version: Some(rec.version),
            seen_storage: Default::default(),
        })
    }

    /// Save `state` (filtered to the profile's origins) as `loaded`'s next version. Local
    /// storage of an origin no tab showed at the end is the one last seen during the task, else
    /// the one that was loaded.
    pub async fn save(
        &self,
        loaded: &LoadedProfile,
        state: ProfileState,
    ) -> Result<ProfileSave, ProfileError> {
        let name = loaded.name.as_str();
        let spec = self.spec(name)?;
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| ProfileError::NoKey(name.to_string()))?;
        let mut state = state.only(&loaded.origins);
        for (origin, items) in loaded
            .seen_storage
            .iter()
            .chain(&loaded.state.local_storage)
        {
            state
                .local_storage
                .entry(origin.clone())
                .or_insert_with(|| items.clone());
        }
        let plain = Zeroizing::new(
            serde_json::to_vec(&state).map_err(|_| ProfileError::Corrupt(name.to_string()))?,
        );
        if plain.len() > MAX_PROFILE_BYTES {
            return Err(ProfileError::TooLarge {
                name: name.to_string(),
                size: plain.len(),
                limit: MAX_PROFILE_BYTES,
            });
        }
        let (nonce, ciphertext) = key
            .seal(name, &plain)
            .map_err(|_| ProfileError::Corrupt(name.to_string()))?;
        let rec = ProfileRecord {
            name: name.to_string(),
            origins: spec.origins.clone(),
            ciphertext,
            nonce,
            key_id: key.id().to_string(),
            size_bytes: plain.len() as i64,
            created_ms: 0,
            updated_ms: 0,
            last_used_ms: None,
            version: 0,
        };
        let store_err = |source| ProfileError::Store {
            name: name.to_string(),
            source,
        };
        self.store
            .save_profile(&rec, loaded.version)
            .await
            .map_err(store_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_from_hex_and_base64_and_refuse_other_lengths() {
        let hex_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let a = ProfileKey::parse(hex_key).expect("hex");
        let b64 = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(hex::decode(hex_key).expect("hex"))
        };
        let b = ProfileKey::parse(&format!(" {b64}\n")).expect("base64");
        assert_eq!(a.id(), b.id(), "the same key either way");
        assert!(a.id().starts_with("sha256:") && a.id().len() == 23);
        assert!(ProfileKey::parse("abcd").unwrap_err().contains("bytes"));
        assert!(ProfileKey::parse("not a key!").unwrap_err().contains("hex"));
        assert!(
            !format!("{a:?}").contains("0011"),
            "Debug never shows the key"
        );
    }

    #[test]
    fn sealed_profiles_open_only_with_their_key_and_name() {
        let k1 = ProfileKey::parse(&"11".repeat(32)).expect("key");
        let k2 = ProfileKey::parse(&"22".repeat(32)).expect("key");
        let (n, ct) = k1.seal("portal", b"session=abc").expect("seal");
        assert!(!ct.windows(11).any(|w| w == b"session=abc"));
        assert_eq!(
            k1.open("portal", &n, &ct).as_deref().map(|v| v.as_slice()),
            Some(&b"session=abc"[..])
        );
        assert!(k2.open("portal", &n, &ct).is_none(), "another key");
        assert!(k1.open("other", &n, &ct).is_none(), "another name");
        let mut bad = ct.clone();
        bad[0] ^= 1;
        assert!(k1.open("portal", &n, &bad).is_none(), "altered bytes");
        let (n2, _) = k1.seal("portal", b"session=abc").expect("seal");
        assert_ne!(n, n2, "a fresh nonce per save");
    }
}
