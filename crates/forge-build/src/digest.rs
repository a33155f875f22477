//! SHA-256 of files and bytes as lowercase hex: what checksums.json, build-manifest.json and the
//! shipped Lightpanda's record use. The lowest module of the crate (no other module of it).

use std::fs;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::BuildError;

/// The SHA-256 of the file at `path`, read in 64 KiB pieces (the forge and Lightpanda binaries
/// are tens of megabytes).
pub(crate) fn sha256_file(path: &Path) -> Result<String, BuildError> {
    let mut f = fs::File::open(path).map_err(|e| BuildError::io(path, "reading", e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| BuildError::io(path, "reading", e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
