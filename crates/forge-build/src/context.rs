//! `forge build`: writes the build context and everything around it into the output directory.
//!
//! Layout (all paths relative to the output dir):
//! `Dockerfile`, `.dockerignore`, `bin/forge`, `agent/` (forge.yaml, skills/), `agent.json`,
//! `compiled/security-audit.json`, `compiled/egress_allowlist.json`, `k8s/*.yaml`,
//! `build-manifest.json`, `checksums.json`; for an agent using Lightpanda also `lightpanda/`
//! (the binary, its `LICENSE`, `SOURCE.md`).
//!
//! Determinism: every file is a function of the inputs and of one timestamp, which appears only
//! in the declared fields (`build-manifest.json` `built_at` and `source_date_epoch`,
//! `compiled/security-audit.json` `timestamp`) and therefore in those files' checksums. With
//! `SOURCE_DATE_EPOCH` set, two builds are byte-identical.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use forge_time::rfc3339;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::digest::{hex, sha256_file};
use crate::dockerfile::{self, BASE_IMAGE, BROWSER_PACKAGES};
use crate::error::BuildError;
use crate::k8s;
use crate::spec::BuildSpec;
use crate::tools::documented_tool_plan;

/// Name of the default output directory (inside the agent directory).
pub const DEFAULT_OUTPUT_DIR: &str = ".forge-output";

/// The files whose content carries the build timestamp, and the fields that hold it.
pub const DECLARED_TIMESTAMPS: &[(&str, &[&str])] = &[
    ("build-manifest.json", &["built_at", "source_date_epoch"]),
    ("compiled/security-audit.json", &["timestamp"]),
];

/// How to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Where to write (created; a previous forge build output there is replaced).
    pub output_dir: PathBuf,
    /// The forge binary to put in the image (a Linux build compatible with the base image).
    pub forge_bin: PathBuf,
    /// The image reference the manifests should run (see [`BuildSpec::image_tag`]).
    pub image_tag: String,
    /// Seconds since the epoch for the declared timestamps (see [`build_timestamp`]).
    pub timestamp: i64,
    /// The Lightpanda binary to put in the image when the agent uses it; `None`:
    /// `FORGE_LIGHTPANDA_BIN`, else `lightpanda` on PATH (how forge finds it at run time).
    pub lightpanda_bin: Option<PathBuf>,
}

/// Where the build context keeps the Lightpanda binary (`lightpanda/` is copied to
/// `/opt/lightpanda/` in the image).
const LIGHTPANDA_CONTEXT_BIN: &str = "lightpanda/lightpanda";

/// What a build wrote.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    pub output_dir: PathBuf,
    /// Every file written, relative to the output dir, sorted.
    pub files: Vec<String>,
    /// Things the user should know (e.g. secret-looking files that were left out).
    pub warnings: Vec<String>,
    pub browser: bool,
    /// The browser engines in the image (`chromium`, `lightpanda`), empty without the browser.
    pub engines: Vec<String>,
    /// The Lightpanda shipped, when it is.
    pub lightpanda: Option<crate::lightpanda::LightpandaBinary>,
    pub image_tag: String,
}

/// `SOURCE_DATE_EPOCH` when set (reproducible builds), else now.
pub fn build_timestamp() -> i64 {
    if let Some(v) = std::env::var_os("SOURCE_DATE_EPOCH") {
        if let Some(n) = v.to_str().and_then(|s| s.trim().parse::<i64>().ok()) {
            return n;
        }
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn json_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising plain data structs and serde_json::Value cannot fail (no maps with non-string keys).
    let mut s = serde_json::to_string_pretty(v).expect("plain data serialises to JSON");
    s.push('\n');
    s.into_bytes()
}

/// Writes files under one root and remembers what it wrote.
struct Writer {
    root: PathBuf,
    files: Vec<String>,
}

impl Writer {
    fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<(), BuildError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| BuildError::io(parent, "creating directory", e))?;
        }
        fs::write(&path, bytes).map_err(|e| BuildError::io(&path, "writing", e))?;
        self.files.push(rel.to_string());
        Ok(())
    }

    fn copy(&mut self, rel: &str, from: &Path, mode: u32) -> Result<(), BuildError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| BuildError::io(parent, "creating directory", e))?;
        }
        fs::copy(from, &path)
            .map_err(|e| BuildError::io(from, "copying into the build context", e))?;
        set_mode(&path, mode)?;
        self.files.push(rel.to_string());
        Ok(())
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), BuildError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| BuildError::io(path, "setting permissions", e))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<(), BuildError> {
    Ok(())
}

/// Names never copied into the image: hidden files and directories (`.env`, `.git`, `.forge`,
/// ...), private keys and certificates bundles.
fn is_secret_like(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with('.')
        || [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore"]
            .iter()
            .any(|ext| lower.ends_with(ext))
        || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]
            .iter()
            .any(|p| lower.starts_with(p))
}

/// Copies `dir` (recursively, sorted) to `rel` in the context, leaving out secret-like names,
/// symlinks that leave `root`, and `skip` (the output dir, if it is inside).
fn copy_tree(
    w: &mut Writer,
    dir: &Path,
    rel: &str,
    root: &Path,
    skip: &Path,
    warnings: &mut Vec<String>,
) -> Result<(), BuildError> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| BuildError::io(dir, "reading directory", e))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = format!("{rel}/{name}");
        if is_secret_like(&name) {
            warnings.push(format!(
                "left {} out of the image: hidden or secret-looking files are never copied",
                shown.trim_start_matches("agent/")
            ));
            continue;
        }
        if fs::canonicalize(&path).ok().as_deref() == Some(skip) {
            continue;
        }
        let meta = fs::symlink_metadata(&path).map_err(|e| BuildError::io(&path, "reading", e))?;
        let target_meta = if meta.file_type().is_symlink() {
            let target = fs::canonicalize(&path)
                .map_err(|e| BuildError::io(&path, "resolving symlink", e))?;
            if !target.starts_with(root) {
                warnings.push(format!(
                    "left {} out of the image: it is a symlink leaving the agent's skills directory",
                    shown.trim_start_matches("agent/")
                ));
                continue;
            }
            fs::metadata(&target).map_err(|e| BuildError::io(&target, "reading", e))?
        } else {
            meta
        };
        if target_meta.is_dir() {
            if fs::symlink_metadata(&path)
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
            {
                // A directory symlink inside the tree would be copied twice (or loop).
                warnings.push(format!(
                    "left {} out of the image: directory symlinks are not followed",
                    shown.trim_start_matches("agent/")
                ));
                continue;
            }
            copy_tree(w, &path, &shown, root, skip, warnings)?;
        } else if target_meta.is_file() {
            let mode = if is_executable(&target_meta) {
                0o755
            } else {
                0o644
            };
            w.copy(&shown, &path, mode)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    false
}

/// True when `path` starts with the ELF magic (a Linux executable; a macOS or Windows build of
/// forge cannot run in the image).
fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Makes `dir` an empty directory, refusing to clear anything forge did not write.
fn prepare_output_dir(dir: &Path, agent_dir: &Path) -> Result<(), BuildError> {
    if dir.exists() {
        let canon = fs::canonicalize(dir).map_err(|e| BuildError::io(dir, "resolving", e))?;
        if let Ok(agent) = fs::canonicalize(agent_dir) {
            if agent.starts_with(&canon) {
                return Err(BuildError::NotForgeOutput(dir.to_path_buf()));
            }
        }
        let mut entries =
            fs::read_dir(dir).map_err(|e| BuildError::io(dir, "reading directory", e))?;
        if entries.next().is_some() {
            let manifest = dir.join("build-manifest.json");
            let ours = fs::read(&manifest)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v.get("generator").and_then(|g| g.as_str()) == Some(GENERATOR));
            if !ours {
                return Err(BuildError::NotForgeOutput(dir.to_path_buf()));
            }
            fs::remove_dir_all(dir)
                .map_err(|e| BuildError::io(dir, "removing the previous build output", e))?;
        }
    }
    fs::create_dir_all(dir).map_err(|e| BuildError::io(dir, "creating directory", e))
}

const GENERATOR: &str = "forge build";

#[derive(Serialize)]
struct AgentJson<'a> {
    agent_id: &'a str,
    version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    framework: Option<&'a str>,
    model: &'a crate::spec::ModelSpec,
    skills: Vec<AgentSkill<'a>>,
    capabilities: &'a [String],
    browser: AgentBrowser<'a>,
    tools: Vec<crate::tools::PlannedTool>,
    tools_not_registered: Vec<crate::tools::PlannedTool>,
    env: AgentEnv,
    egress: AgentEgress<'a>,
}

#[derive(Serialize)]
struct AgentSkill<'a> {
    name: &'a str,
    source: &'a str,
    capabilities: &'a [String],
    tools: Vec<&'a str>,
}

#[derive(Serialize)]
struct AgentBrowser<'a> {
    enabled: bool,
    engines: Vec<&'static str>,
    /// Each browser skill and its engine (`requires.browser_engine`, else forge.yaml's).
    skill_engines: &'a [forge_skills::SkillEngine],
    requested_by: Vec<&'a str>,
    allow_sensitive_fill: bool,
}

#[derive(Serialize)]
struct AgentEnv {
    required: Vec<String>,
    optional: Vec<String>,
    one_of: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct AgentEgress<'a> {
    mode: &'a str,
    domains: Vec<String>,
    allow_private_ips: bool,
    allowed_private_cidrs: &'a [String],
}

#[derive(Serialize)]
struct EgressAllowlist<'a> {
    mode: &'a str,
    allowed_domains: &'a [String],
    skill_domains: &'a [String],
    model_domains: Vec<String>,
    mcp_domains: Vec<String>,
    all_domains: Vec<String>,
}

#[derive(Serialize)]
struct BuildManifest<'a> {
    generator: &'static str,
    agent_id: &'a str,
    version: &'a str,
    image: &'a str,
    built_at: String,
    source_date_epoch: i64,
    declared_timestamps: BTreeMap<&'static str, &'static [&'static str]>,
    versions: Versions,
    egress_mode: &'a str,
    browser_included: bool,
    browser_engines: Vec<&'static str>,
    browser_packages: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lightpanda: Option<ManifestLightpanda<'a>>,
    apt_packages: Vec<String>,
    skills: Vec<&'a str>,
    files: Vec<String>,
}

/// build-manifest.json `lightpanda`: what was shipped and under which licence.
#[derive(Serialize)]
struct ManifestLightpanda<'a> {
    version: &'a str,
    sha256: &'a str,
    /// Where it is in the image (`FORGE_LIGHTPANDA_BIN`).
    path: &'static str,
    /// The file in the build context.
    file: &'static str,
    license: &'static str,
    license_file: &'static str,
    source: String,
    /// Always true: forge runs it as a separate program, never links it.
    unmodified: bool,
}

#[derive(Serialize)]
struct Versions {
    forge: &'static str,
    base_image: &'static str,
    dockerfile_template_sha256: String,
    forge_binary_sha256: String,
}

#[derive(Serialize)]
struct Checksums {
    algorithm: &'static str,
    files: BTreeMap<String, String>,
}

/// Writes the whole build output for `spec`. Fails before writing anything when the spec is
/// invalid or the audit has errors.
pub fn write_build(spec: &BuildSpec, opts: &BuildOptions) -> Result<BuildOutput, BuildError> {
    spec.validate()?;
    if !spec.audit.errors.is_empty() {
        return Err(BuildError::Audit {
            reasons: spec.audit.errors.clone(),
        });
    }
    let forge_meta = fs::metadata(&opts.forge_bin).map_err(|e| {
        BuildError::io(
            &opts.forge_bin,
            "reading the forge binary to put in the image",
            e,
        )
    })?;
    if !forge_meta.is_file() {
        return Err(BuildError::invalid(
            &opts.forge_bin.display().to_string(),
            "--forge-bin",
            "not a file",
            "name a Linux forge executable compatible with debian:bookworm-slim",
        ));
    }
    // Lightpanda, when the agent uses it: found and checked before anything is written.
    let lightpanda = if spec.needs_lightpanda() {
        let path = match &opts.lightpanda_bin {
            Some(p) => crate::lightpanda::find_lightpanda(Some(p.clone()), None)?,
            None => crate::lightpanda::find_lightpanda(
                std::env::var_os(crate::lightpanda::LIGHTPANDA_BIN_VAR).map(PathBuf::from),
                std::env::var_os("PATH"),
            )?,
        };
        Some(crate::lightpanda::inspect_lightpanda(&path)?)
    } else {
        None
    };
    let dockerfile = dockerfile::render_dockerfile(spec, lightpanda.as_ref())?;
    let manifests = k8s::render_manifests(spec, &opts.image_tag)?;

    prepare_output_dir(&opts.output_dir, &spec.agent_dir)?;
    let out_canon = fs::canonicalize(&opts.output_dir)
        .map_err(|e| BuildError::io(&opts.output_dir, "resolving", e))?;
    let mut w = Writer {
        root: opts.output_dir.clone(),
        files: Vec::new(),
    };
    let mut warnings = Vec::new();

    w.write("Dockerfile", dockerfile.as_bytes())?;
    w.write(
        ".dockerignore",
        dockerfile::render_dockerignore().as_bytes(),
    )?;
    w.copy("bin/forge", &opts.forge_bin, 0o755)?;
    if let Some(lp) = &lightpanda {
        // Unmodified, beside its licence and the note saying where its source is.
        w.copy(LIGHTPANDA_CONTEXT_BIN, &lp.path, 0o755)?;
        w.write(
            "lightpanda/LICENSE",
            crate::lightpanda::LIGHTPANDA_LICENSE_TEXT.as_bytes(),
        )?;
        w.write(
            "lightpanda/SOURCE.md",
            crate::lightpanda::source_note(lp).as_bytes(),
        )?;
    }
    if !is_elf(&opts.forge_bin) {
        warnings.push(format!(
            "{} is not a Linux (ELF) executable: the image will not start; pass --forge-bin with a Linux build of forge for {BASE_IMAGE}",
            opts.forge_bin.display()
        ));
    }

    if let Some(v) = std::env::var_os("FORGE_BROWSER_ENGINE").filter(|v| !v.is_empty()) {
        if spec.needs_browser() {
            warnings.push(format!(
                "FORGE_BROWSER_ENGINE={} is set, but forge build takes the engines from forge.yaml                  `browser.engine` and the skills' `requires.browser_engine` only; the image carries {}                  (set browser.engine in forge.yaml to ship another engine; setting the variable in                  the image to an engine it lacks stops forge at start-up)",
                v.to_string_lossy(),
                dockerfile::engine_names(spec)
            ));
        }
    }

    // One image, one architecture: a Lightpanda for another machine than forge's will not run.
    if let Some(lp) = &lightpanda {
        let machines = (
            crate::lightpanda::elf_machine(&opts.forge_bin),
            crate::lightpanda::elf_machine(&lp.path),
        );
        if let (Some(f), Some(l)) = machines {
            if f != l {
                warnings.push(format!(
                    "{} is built for {} but the forge binary {} for {}: one of them will not run \
                     in the image; give both for the image's architecture (--lightpanda-bin, --forge-bin)",
                    lp.path.display(),
                    crate::lightpanda::machine_name(l),
                    opts.forge_bin.display(),
                    crate::lightpanda::machine_name(f),
                ));
            }
        }
    }

    if spec.confinement == forge_skills::Confinement::Required {
        warnings.push(
            "forge.yaml security.confinement is `required`: the generated pod (seccomp \
             RuntimeDefault, every capability dropped) cannot create network namespaces, so forge \
             will refuse to start in it until the pod gets what the `forge.dev/confinement-needs` \
             annotation says (docs/build.md); with `auto` it runs proxy-only there"
                .to_string(),
        );
    }

    // Agent files: forge.yaml, skills/, the root skill file. Nothing hidden or secret-looking.
    w.copy("agent/forge.yaml", &spec.config_path, 0o644)?;
    let skills_dir = spec.agent_dir.join("skills");
    if skills_dir.is_dir() {
        let root = fs::canonicalize(&skills_dir)
            .map_err(|e| BuildError::io(&skills_dir, "resolving", e))?;
        copy_tree(
            &mut w,
            &skills_dir,
            "agent/skills",
            &root,
            &out_canon,
            &mut warnings,
        )?;
    }
    for extra in &spec.extra_agent_files {
        let rel = extra.to_string_lossy().replace('\\', "/");
        if rel.starts_with("skills/") || rel == "forge.yaml" {
            continue;
        }
        let name = extra
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if rel.split('/').any(|c| c == ".." || c.is_empty())
            || extra.is_absolute()
            || is_secret_like(&name)
        {
            warnings.push(format!("left {rel} out of the image: only files inside the agent directory are copied, never secret-looking ones"));
            continue;
        }
        let src = spec.agent_dir.join(extra);
        if src.is_file() {
            w.copy(&format!("agent/{rel}"), &src, 0o644)?;
        }
    }

    // agent.json
    let plan = documented_tool_plan(spec);
    let (required, optional) = spec.env_names();
    let agent = AgentJson {
        agent_id: &spec.agent_id,
        version: &spec.version,
        framework: spec.framework.as_deref(),
        model: &spec.model,
        skills: spec
            .skills
            .iter()
            .map(|s| AgentSkill {
                name: &s.name,
                source: &s.source,
                capabilities: &s.capabilities,
                tools: s.tools.iter().map(|t| t.name.as_str()).collect(),
            })
            .collect(),
        capabilities: &spec.capabilities,
        browser: AgentBrowser {
            enabled: spec.needs_browser(),
            engines: spec.browser_engines().iter().map(|e| e.name()).collect(),
            skill_engines: spec
                .browser
                .as_ref()
                .map_or(&[], |b| b.skill_engines.as_slice()),
            requested_by: spec
                .browser
                .as_ref()
                .map(|b| b.skills.iter().map(|s| s.as_str()).collect())
                .unwrap_or_default(),
            allow_sensitive_fill: spec
                .browser
                .as_ref()
                .is_some_and(|b| b.allow_sensitive_fill),
        },
        tools: plan.iter().filter(|t| t.registered).cloned().collect(),
        tools_not_registered: plan.iter().filter(|t| !t.registered).cloned().collect(),
        env: AgentEnv {
            required,
            optional,
            one_of: spec.env.one_of.clone(),
        },
        egress: AgentEgress {
            mode: spec.egress.mode.as_str(),
            domains: spec.all_domains(),
            allow_private_ips: spec.egress.allow_private_ips,
            allowed_private_cidrs: &spec.egress.allowed_private_cidrs,
        },
    };
    w.write("agent.json", &json_bytes(&agent))?;

    // compiled/
    let mut audit = spec.audit.report.clone();
    audit.timestamp = rfc3339(opts.timestamp);
    let mut audit_json = audit.to_json();
    audit_json.push('\n');
    w.write("compiled/security-audit.json", audit_json.as_bytes())?;
    let allow = EgressAllowlist {
        mode: spec.egress.mode.as_str(),
        allowed_domains: &spec.egress.allowed_domains,
        skill_domains: &spec.egress.skill_domains,
        model_domains: spec.model_domains(),
        mcp_domains: spec.mcp_domains(),
        all_domains: spec.all_domains(),
    };
    w.write("compiled/egress_allowlist.json", &json_bytes(&allow))?;

    for (path, text) in &manifests {
        w.write(path, text.as_bytes())?;
    }

    // build-manifest.json lists every file above; checksums.json covers it too.
    let mut files = w.files.clone();
    files.sort();
    let browser = spec.needs_browser();
    // Hashed once: the forge binary is by far the largest file.
    let forge_sha = sha256_file(&opts.output_dir.join("bin/forge"))?;
    let manifest = BuildManifest {
        generator: GENERATOR,
        agent_id: &spec.agent_id,
        version: &spec.version,
        image: &opts.image_tag,
        built_at: rfc3339(opts.timestamp),
        source_date_epoch: opts.timestamp,
        declared_timestamps: DECLARED_TIMESTAMPS.iter().copied().collect(),
        versions: Versions {
            forge: env!("CARGO_PKG_VERSION"),
            base_image: BASE_IMAGE,
            dockerfile_template_sha256: hex(&Sha256::digest(
                dockerfile::DOCKERFILE_TEMPLATE.as_bytes(),
            )),
            forge_binary_sha256: forge_sha.clone(),
        },
        egress_mode: spec.egress.mode.as_str(),
        browser_included: browser,
        browser_engines: spec.browser_engines().iter().map(|e| e.name()).collect(),
        browser_packages: if spec.needs_chromium() {
            BROWSER_PACKAGES.to_vec()
        } else {
            Vec::new()
        },
        lightpanda: lightpanda.as_ref().map(|lp| ManifestLightpanda {
            version: &lp.version,
            sha256: &lp.sha256,
            path: crate::lightpanda::LIGHTPANDA_IMAGE_BIN,
            file: LIGHTPANDA_CONTEXT_BIN,
            license: crate::lightpanda::LIGHTPANDA_LICENSE_ID,
            license_file: "lightpanda/LICENSE",
            source: format!(
                "{} (release {})",
                crate::lightpanda::LIGHTPANDA_SOURCE_URL,
                lp.version
            ),
            unmodified: true,
        }),
        apt_packages: dockerfile::apt_packages(spec),
        skills: spec.skills.iter().map(|s| s.name.as_str()).collect(),
        files,
    };
    w.write("build-manifest.json", &json_bytes(&manifest))?;

    let mut sums = BTreeMap::new();
    for f in &w.files {
        let sum = if f == "bin/forge" {
            forge_sha.clone()
        } else if let Some(lp) = lightpanda.as_ref().filter(|_| f == LIGHTPANDA_CONTEXT_BIN) {
            // Hashed when inspected; the copy is byte for byte.
            lp.sha256.clone()
        } else {
            sha256_file(&opts.output_dir.join(f))?
        };
        sums.insert(f.clone(), sum);
    }
    w.write(
        "checksums.json",
        &json_bytes(&Checksums {
            algorithm: "sha256",
            files: sums,
        }),
    )?;

    let mut files = w.files;
    files.sort();
    Ok(BuildOutput {
        output_dir: opts.output_dir.clone(),
        files,
        warnings,
        browser,
        engines: spec
            .browser_engines()
            .iter()
            .map(|e| e.name().to_string())
            .collect(),
        lightpanda,
        image_tag: opts.image_tag.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn secret_like_names() {
        for n in [
            ".env",
            ".env.local",
            "server.pem",
            "tls.KEY",
            "id_rsa",
            "id_ed25519.pub",
            ".git",
        ] {
            assert!(is_secret_like(n), "{n}");
        }
        for n in ["SKILL.md", "scripts", "run.sh", "keys.md"] {
            assert!(!is_secret_like(n), "{n}");
        }
    }
}
