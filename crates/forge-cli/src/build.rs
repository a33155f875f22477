//! `forge build` (build context + Kubernetes manifests) and `forge package` (container image).
//! Argument parsing and output only; the work is in forge-build.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use forge_build::{BuildError, BuildOptions, BuildSpec, ImageRequest};
use forge_skills::Agent;

#[derive(Args)]
pub(crate) struct BuildArgs {
    /// The agent's forge.yaml.
    #[arg(long, short = 'c', default_value = "forge.yaml")]
    config: PathBuf,
    /// Output directory (default: .forge-output next to forge.yaml).
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Audit policy YAML (overrides the default policy's fields it sets).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The forge binary to put in the image (default: this one). Must be a Linux build that
    /// runs on debian:bookworm-slim.
    #[arg(long)]
    forge_bin: Option<PathBuf>,
    /// The Lightpanda binary to put in the image when the agent uses it (default:
    /// FORGE_LIGHTPANDA_BIN, else `lightpanda` on PATH). Must be the binary itself, not pip's
    /// `lightpanda` command.
    #[arg(long)]
    lightpanda_bin: Option<PathBuf>,
    /// Registry prefix for the image the manifests reference (e.g. ghcr.io/acme).
    #[arg(long)]
    registry: Option<String>,
    /// Image tag instead of the agent version (a value with ':' or '/' is a full reference).
    #[arg(long)]
    tag: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum BuilderName {
    Docker,
    Podman,
    Buildah,
}

impl BuilderName {
    fn as_str(self) -> &'static str {
        match self {
            BuilderName::Docker => "docker",
            BuilderName::Podman => "podman",
            BuilderName::Buildah => "buildah",
        }
    }
}

#[derive(Args)]
pub(crate) struct PackageArgs {
    /// The agent's forge.yaml.
    #[arg(long, short = 'c', default_value = "forge.yaml")]
    config: PathBuf,
    /// Build output directory (default: .forge-output next to forge.yaml).
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Audit policy YAML.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The forge binary to put in the image (default: this one).
    #[arg(long)]
    forge_bin: Option<PathBuf>,
    /// The Lightpanda binary to put in the image when the agent uses it (default:
    /// FORGE_LIGHTPANDA_BIN, else `lightpanda` on PATH).
    #[arg(long)]
    lightpanda_bin: Option<PathBuf>,
    /// Refuse configurations unfit for production (dev-open egress, uncurated browser
    /// allowlists, dev-only tools, audit errors, unnarrowed private IPs).
    #[arg(long)]
    prod: bool,
    /// Container builder (default: the first of docker, podman, buildah on PATH).
    #[arg(long, value_enum)]
    builder: Option<BuilderName>,
    /// Registry prefix: the image is tagged REGISTRY/agent_id:version.
    #[arg(long)]
    registry: Option<String>,
    /// Push the image after building it.
    #[arg(long)]
    push: bool,
    /// Image tag instead of the agent version (a value with ':' or '/' is a full reference).
    #[arg(long)]
    tag: Option<String>,
    /// Use the existing build output as is (fails when there is none).
    #[arg(long)]
    skip_build: bool,
}

/// A failure already explained on stderr.
struct Reported;

fn fail(e: impl std::fmt::Display) -> Reported {
    eprintln!("error: {e}");
    Reported
}

/// Loads the agent, runs the audit, converts to the build's input.
fn load_spec(config: &Path, policy: Option<&Path>) -> Result<BuildSpec, Reported> {
    let agent = match Agent::load(config) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{:?}", forge_skills::miette::Report::new(e));
            return Err(Reported);
        }
    };
    for w in &agent.config.warnings {
        eprintln!("warning: {w}");
    }
    let audit = forge_build::audit_agent(&agent, policy).map_err(fail)?;
    Ok(forge_build::spec_from_agent(&agent, audit))
}

fn output_dir(spec: &BuildSpec, output: Option<&Path>) -> PathBuf {
    output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| spec.agent_dir.join(forge_build::DEFAULT_OUTPUT_DIR))
}

fn forge_bin(arg: Option<&Path>) -> Result<PathBuf, Reported> {
    match arg {
        Some(p) => Ok(p.to_path_buf()),
        None => std::env::current_exe().map_err(|e| {
            fail(format!(
                "cannot find the running forge binary to put in the image ({e})\n  fix: pass --forge-bin PATH"
            ))
        }),
    }
}

fn write(
    spec: &BuildSpec,
    out: &Path,
    forge: &Path,
    lightpanda: Option<&Path>,
    image: &str,
) -> Result<(), Reported> {
    if spec.egress.allow_private_ips && spec.egress.allowed_private_cidrs.is_empty() {
        eprintln!(
            "warning: {}: field `egress.allow_private_ips`: true without `allowed_private_cidrs` opens every private network to the agent (forge package --prod rejects this)",
            spec.config_path.display()
        );
    }
    let result = forge_build::write_build(
        spec,
        &BuildOptions {
            output_dir: out.to_path_buf(),
            forge_bin: forge.to_path_buf(),
            image_tag: image.to_string(),
            timestamp: forge_build::build_timestamp(),
            lightpanda_bin: lightpanda.map(Path::to_path_buf),
        },
    )
    .map_err(fail)?;
    for w in &result.warnings {
        eprintln!("warning: {w}");
    }
    let browser = if result.browser {
        format!("included: {}", result.engines.join(", "))
    } else {
        "not included".to_string()
    };
    eprintln!(
        "forge build: wrote {} files to {} (image {}, browser {browser})",
        result.files.len(),
        result.output_dir.display(),
        result.image_tag,
    );
    if let Some(lp) = &result.lightpanda {
        eprintln!(
            "forge build: shipping Lightpanda {} from {} unmodified, with its licence ({}) and \
             source note in lightpanda/; whoever conveys the image must offer its source \
             (docs/browser.md, \"Licence\")",
            lp.version,
            lp.path.display(),
            forge_build::LIGHTPANDA_LICENSE_ID
        );
    }
    Ok(())
}

fn do_build(args: BuildArgs) -> Result<(), Reported> {
    let spec = load_spec(&args.config, args.policy.as_deref())?;
    let out = output_dir(&spec, args.output.as_deref());
    let forge = forge_bin(args.forge_bin.as_deref())?;
    let image = spec.image_tag(args.registry.as_deref(), args.tag.as_deref());
    write(&spec, &out, &forge, args.lightpanda_bin.as_deref(), &image)?;
    println!("{}", out.display());
    Ok(())
}

fn do_package(args: PackageArgs) -> Result<(), Reported> {
    let spec = load_spec(&args.config, args.policy.as_deref())?;
    if args.prod {
        let problems = forge_build::prod_problems(&spec);
        if !problems.is_empty() {
            return Err(fail(BuildError::Prod { problems }));
        }
        eprintln!("forge package: production checks passed");
    }
    let out = output_dir(&spec, args.output.as_deref());
    let image = spec.image_tag(args.registry.as_deref(), args.tag.as_deref());
    if args.skip_build {
        if !out.join("build-manifest.json").is_file() {
            return Err(fail(BuildError::MissingOutput(out)));
        }
    } else if let Some(reason) =
        forge_build::stale_reason(&out, &spec.config_path, &spec.agent_dir, &image)
    {
        eprintln!("forge package: running forge build ({reason})");
        let forge = forge_bin(args.forge_bin.as_deref())?;
        write(&spec, &out, &forge, args.lightpanda_bin.as_deref(), &image)?;
    }
    let builder =
        forge_build::detect_builder(args.builder.map(BuilderName::as_str), &out).map_err(fail)?;
    eprintln!(
        "forge package: building {image} with {} ({})",
        builder.name,
        builder.path.display()
    );
    let manifest = forge_build::build_image(
        &builder,
        &ImageRequest {
            tag: image.clone(),
            context_dir: out.clone(),
            push: args.push,
            prod: args.prod,
        },
        &forge_build::rfc3339(forge_build::build_timestamp()),
    )
    .map_err(fail)?;
    eprintln!(
        "forge package: built {}{}; wrote {}",
        manifest.image,
        if manifest.pushed {
            " and pushed it"
        } else {
            ""
        },
        out.join("image-manifest.json").display()
    );
    println!("{}", manifest.image);
    Ok(())
}

pub(crate) fn build(args: BuildArgs) -> ExitCode {
    match do_build(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Reported) => ExitCode::FAILURE,
    }
}

pub(crate) fn package(args: PackageArgs) -> ExitCode {
    match do_package(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Reported) => ExitCode::FAILURE,
    }
}
