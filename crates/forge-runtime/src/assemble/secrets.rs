//! Resolving forge.yaml `secrets:` at start: each reference (`env:NAME`, `file:/path`) is read
//! once into a [`forge_tools::Secret`] whose value never prints; a missing or empty source stops
//! startup naming the secret and the fix. Values never leave this module except inside
//! [`forge_tools::Secrets`].

use std::sync::Arc;

use forge_skills::{SecretSource, SecretsConfig};
use forge_tools::{BoundOrigin, Secret, SecretUseSink, SecretValue, Secrets};

use super::options::{AssembleError, EnvLookup};

/// Largest secret file read (64 KiB: tokens, passwords and keys are far smaller).
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// Resolve every secret of `cfg` through `env` and the file system.
pub(crate) fn resolve(
    cfg: &SecretsConfig,
    env: &EnvLookup,
    sink: Option<Arc<dyn SecretUseSink>>,
) -> Result<Secrets, AssembleError> {
    let mut list = Vec::new();
    for spec in &cfg.entries {
        let missing = |why: String, fix: String| AssembleError::Secret {
            name: spec.name.clone(),
            reference: spec.source.to_string(),
            why,
            fix,
        };
        let value = match &spec.source {
            SecretSource::Env(var) => match env(var) {
                Some(v) if !v.is_empty() => v,
                Some(_) => {
                    return Err(missing(
                        format!("the environment variable {var} is empty"),
                        format!("export {var} with the secret's value before starting forge (in Kubernetes, the agent's Secret provides it)"),
                    ))
                }
                None => {
                    return Err(missing(
                        format!("the environment variable {var} is not set"),
                        format!("export {var} with the secret's value before starting forge (in Kubernetes, the agent's Secret provides it)"),
                    ))
                }
            },
            SecretSource::File(path) => {
                let fix = format!(
                    "create {} holding only the value (in Kubernetes, mount the Secret there)",
                    path.display()
                );
                let meta = std::fs::metadata(path)
                    .map_err(|e| missing(format!("cannot read {}: {e}", path.display()), fix.clone()))?;
                if !meta.is_file() || meta.len() > MAX_SECRET_FILE {
                    return Err(missing(
                        format!(
                            "{} is not a regular file of at most {MAX_SECRET_FILE} bytes",
                            path.display()
                        ),
                        fix,
                    ));
                }
                let text = std::fs::read_to_string(path).map_err(|e| {
                    missing(format!("cannot read {} as text: {e}", path.display()), fix.clone())
                })?;
                // One trailing newline (as `echo` and most editors write) is not part of it.
                let v = text
                    .strip_suffix("\r\n")
                    .or_else(|| text.strip_suffix('\n'))
                    .unwrap_or(&text)
                    .to_string();
                if v.is_empty() {
                    return Err(missing(format!("{} is empty", path.display()), fix));
                }
                v
            }
        };
        list.push(Secret {
            name: spec.name.clone(),
            value: SecretValue::new(value),
            origins: spec
                .origins
                .iter()
                .map(|o| BoundOrigin {
                    scheme: o.scheme.clone(),
                    host: o.host.clone(),
                    port: o.port,
                })
                .collect(),
            hosts: spec.hosts.clone(),
        });
    }
    Ok(Secrets::new(list, sink))
}
