//! `forge package`: finds a container builder (docker, podman or buildah), decides whether the
//! build output is stale, runs the image build on the output directory, optionally pushes, and
//! writes `image-manifest.json`.
//!
//! The builder's own output goes to forge's stderr (stdout stays for forge's result).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use serde::Serialize;

use crate::error::BuildError;

/// The builders `forge package` knows, in detection order.
pub const BUILDERS: &[&str] = &["docker", "podman", "buildah"];

/// A builder found on PATH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builder {
    /// `docker`, `podman` or `buildah`.
    pub name: String,
    pub path: PathBuf,
}

/// Looks `name` up on PATH (executable regular files only; empty PATH entries are skipped).
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    forge_which::find_in(
        name,
        std::env::split_paths(&path).filter(|d| !d.as_os_str().is_empty()),
    )
}

/// The named builder, or the first of [`BUILDERS`] on PATH.
pub fn detect_builder(requested: Option<&str>, output_dir: &Path) -> Result<Builder, BuildError> {
    if let Some(name) = requested {
        if !BUILDERS.contains(&name) {
            return Err(BuildError::Builder {
                name: name.to_string(),
                problem: "not a supported builder".into(),
                fix: format!("use one of {}", BUILDERS.join(", ")),
            });
        }
        return find_on_path(name)
            .map(|path| Builder {
                name: name.to_string(),
                path,
            })
            .ok_or_else(|| BuildError::Builder {
                name: name.to_string(),
                problem: "not found on PATH".into(),
                fix: format!(
                    "install {name}, drop --builder to use whichever of {} is installed, or build the image elsewhere from {}",
                    BUILDERS.join(", "),
                    output_dir.display()
                ),
            });
    }
    BUILDERS
        .iter()
        .find_map(|name| {
            find_on_path(name).map(|path| Builder {
                name: name.to_string(),
                path,
            })
        })
        .ok_or_else(|| BuildError::NoBuilder {
            searched: BUILDERS.iter().map(|s| s.to_string()).collect(),
            output_dir: output_dir.to_path_buf(),
        })
}

/// Why the build output must be regenerated, or `None` when it is up to date.
pub fn stale_reason(
    output_dir: &Path,
    config_path: &Path,
    agent_dir: &Path,
    image_tag: &str,
) -> Option<String> {
    let manifest_path = output_dir.join("build-manifest.json");
    let Ok(bytes) = fs::read(&manifest_path) else {
        return Some(format!("{} is missing", manifest_path.display()));
    };
    let manifest: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Some(format!("{} is not valid JSON", manifest_path.display())),
    };
    if manifest.get("image").and_then(|v| v.as_str()) != Some(image_tag) {
        return Some(format!(
            "the output was built for another image tag than {image_tag}"
        ));
    }
    let built = mtime(&manifest_path)?;
    if mtime(config_path).is_some_and(|t| t > built) {
        return Some(format!(
            "{} changed after the last build",
            config_path.display()
        ));
    }
    let skills = agent_dir.join("skills");
    if newest_mtime(&skills, 0).is_some_and(|t| t > built) {
        return Some(format!("{} changed after the last build", skills.display()));
    }
    None
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn newest_mtime(p: &Path, depth: usize) -> Option<SystemTime> {
    let meta = fs::metadata(p).ok()?;
    let mut newest = meta.modified().ok();
    if meta.is_dir() && depth < 16 {
        for entry in fs::read_dir(p).ok()?.flatten() {
            if let Some(t) = newest_mtime(&entry.path(), depth + 1) {
                newest = Some(newest.map_or(t, |n| n.max(t)));
            }
        }
    }
    newest
}

/// One image build.
#[derive(Debug, Clone)]
pub struct ImageRequest {
    pub tag: String,
    /// The `forge build` output directory (the build context).
    pub context_dir: PathBuf,
    pub push: bool,
    /// Recorded in image-manifest.json.
    pub prod: bool,
}

/// What `forge package` did, also written to `image-manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageManifest {
    pub agent_id: String,
    pub version: String,
    pub image: String,
    pub builder: String,
    pub build_args: Vec<String>,
    pub context_dir: String,
    pub built_at: String,
    pub pushed: bool,
    pub prod: bool,
    pub browser_included: bool,
    /// The browser engines in the image (build-manifest.json `browser_engines`).
    pub browser_engines: Vec<String>,
    pub image_id: Option<String>,
}

/// The build arguments for the image, read from the build manifest: the declared timestamp as
/// `SOURCE_DATE_EPOCH` (reproducible layer times) and `FORGE_BUILD_CREATED` (the OCI label).
pub fn build_args(context_dir: &Path) -> Result<Vec<(String, String)>, BuildError> {
    let path = context_dir.join("build-manifest.json");
    let bytes =
        fs::read(&path).map_err(|_| BuildError::MissingOutput(context_dir.to_path_buf()))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| BuildError::MissingOutput(context_dir.to_path_buf()))?;
    let epoch = v
        .get("source_date_epoch")
        .and_then(|x| x.as_i64())
        .unwrap_or(0);
    let created = v
        .get("built_at")
        .and_then(|x| x.as_str())
        .unwrap_or("1970-01-01T00:00:00Z")
        .to_string();
    Ok(vec![
        ("SOURCE_DATE_EPOCH".into(), epoch.to_string()),
        ("FORGE_BUILD_CREATED".into(), created),
    ])
}

/// The argument vector (without the program) for building `req` with `builder`.
/// docker, podman and buildah (`buildah build`) all accept this form.
pub fn build_command(
    req: &ImageRequest,
    args: &[(String, String)],
    iidfile: &Path,
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["build".into(), "-t".into(), req.tag.clone().into()];
    out.push("-f".into());
    out.push(req.context_dir.join("Dockerfile").into_os_string());
    for (k, v) in args {
        out.push("--build-arg".into());
        out.push(format!("{k}={v}").into());
    }
    out.push("--iidfile".into());
    out.push(iidfile.as_os_str().to_owned());
    out.push(req.context_dir.clone().into_os_string());
    out
}

fn run(builder: &Builder, args: &[OsString], context_dir: &Path) -> Result<(), BuildError> {
    let shown = format!(
        "{} {}",
        builder.name,
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let status = Command::new(&builder.path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| BuildError::Builder {
            name: builder.name.clone(),
            problem: format!("could not start {}: {e}", builder.path.display()),
            fix: "check that the builder is installed and executable".into(),
        })?;
    if !status.success() {
        return Err(BuildError::BuilderFailed {
            command: shown,
            status: status.to_string(),
            context_dir: context_dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Builds (and optionally pushes) the image, then writes `image-manifest.json` into the context.
pub fn build_image(
    builder: &Builder,
    req: &ImageRequest,
    built_at: &str,
) -> Result<ImageManifest, BuildError> {
    let args = build_args(&req.context_dir)?;
    let manifest_bytes = fs::read(req.context_dir.join("build-manifest.json"))
        .map_err(|_| BuildError::MissingOutput(req.context_dir.clone()))?;
    let bm: serde_json::Value = serde_json::from_slice(&manifest_bytes)
        .map_err(|_| BuildError::MissingOutput(req.context_dir.clone()))?;
    // The builder writes the image id here (docker, podman and buildah all support --iidfile).
    let iid_dir = tempfile::Builder::new()
        .prefix("forge-iid-")
        .tempdir()
        .map_err(|e| BuildError::io(std::env::temp_dir(), "creating a temp dir", e))?;
    let tmp = iid_dir.path().join("image-id");
    let cmd = build_command(req, &args, &tmp);
    let result = run(builder, &cmd, &req.context_dir);
    let image_id = fs::read_to_string(&tmp)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    result?;
    if req.push {
        run(
            builder,
            &["push".into(), req.tag.clone().into()],
            &req.context_dir,
        )?;
    }
    let manifest = ImageManifest {
        agent_id: bm
            .get("agent_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string(),
        version: bm
            .get("version")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string(),
        image: req.tag.clone(),
        builder: builder.name.clone(),
        build_args: args.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        context_dir: req.context_dir.display().to_string(),
        built_at: built_at.to_string(),
        pushed: req.push,
        prod: req.prod,
        browser_included: bm
            .get("browser_included")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        browser_engines: bm
            .get("browser_engines")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        image_id,
    };
    let path = req.context_dir.join("image-manifest.json");
    let mut text =
        serde_json::to_string_pretty(&manifest).map_err(|e| BuildError::Template(e.to_string()))?;
    text.push('\n');
    fs::write(&path, text).map_err(|e| BuildError::io(&path, "writing", e))?;
    Ok(manifest)
}
