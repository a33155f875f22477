//! forge-build: turns an agent into a container build context and Kubernetes manifests
//! (`forge build`), checks it for production (`forge package --prod`) and builds the image with
//! docker, podman or buildah (`forge package`).
//!
//! - [`BuildSpec`] (`spec.rs`): the build's input in plain data, with the name checks.
//! - [`spec_from_agent`], [`audit_agent`] (`agent.rs`): fill a [`BuildSpec`] from a loaded
//!   `forge_skills::Agent` and its `forge_analyzer` audit.
//! - [`render_dockerfile`] (`dockerfile.rs`): the repo-root `Dockerfile.tmpl`, embedded and
//!   rendered with minijinja; `.dockerignore`; the apt package lists (Chromium only for agents
//!   whose browser runs on it).
//! - [`render_manifests`] (`k8s.rs`): Deployment, Service, Secret (keys only), NetworkPolicy.
//! - [`find_lightpanda`], [`inspect_lightpanda`] (`lightpanda.rs`): the Lightpanda binary an
//!   image ships when the agent uses it (found like forge finds it, checked, versioned, hashed),
//!   with its AGPL-3.0 licence text and source note.
//! - [`documented_tool_plan`] (`tools.rs`): agent.json's view of forge-skills' tool plan.
//! - [`write_build`] (`context.rs`): writes the whole output dir deterministically, with
//!   build-manifest.json and checksums.json.
//! - `digest.rs`: SHA-256 of files as hex (checksums, the shipped binaries).
//! - [`prod_problems`] (`prod.rs`): the `--prod` checks.
//! - [`detect_builder`], [`build_image`], [`stale_reason`] (`package.rs`): the image build.
//! - [`BuildError`], [`ProdProblem`] (`error.rs`): every failure, naming file, field and fix
//!   (a `--prod` refusal carries one [`ProdProblem`] per reason).

mod agent;
mod context;
mod digest;
mod dockerfile;
mod error;
mod k8s;
mod lightpanda;
mod package;
mod prod;
mod spec;
mod tools;

pub use agent::{audit_agent, spec_from_agent};
pub use context::{
    build_timestamp, write_build, BuildOptions, BuildOutput, DECLARED_TIMESTAMPS,
    DEFAULT_OUTPUT_DIR,
};
pub use dockerfile::{
    apt_packages, render_dockerfile, render_dockerignore, script_interpreters, AGENT_PORT,
    AGENT_UID, BASE_IMAGE, BASE_PACKAGES, BROWSER_BIN, BROWSER_PACKAGES, DOCKERFILE_TEMPLATE,
};
pub use error::{BuildError, ProdProblem};
/// RFC 3339 UTC text for seconds since the epoch (the build's declared timestamps).
pub use forge_time::rfc3339;
pub use k8s::{render_manifests, secret_name};
pub use lightpanda::{
    find_lightpanda, inspect_lightpanda, LightpandaBinary, LIGHTPANDA_BIN_VAR,
    LIGHTPANDA_IMAGE_BIN, LIGHTPANDA_IMAGE_DIR, LIGHTPANDA_LICENSE_ID, LIGHTPANDA_LICENSE_TEXT,
    LIGHTPANDA_SOURCE_URL,
};
pub use package::{
    build_args, build_command, build_image, detect_builder, find_on_path, stale_reason, Builder,
    ImageManifest, ImageRequest, BUILDERS,
};
pub use prod::{is_cluster_host, is_open_wildcard, prod_problems, DEV_ONLY_TOOLS};
pub use spec::{
    AptPackage, AuditOutcome, BrowserSpec, BuildSpec, EgressSpec, EnvSpec, McpServerSpec,
    ModelSpec, SkillSpec, SkillTool,
};
pub use tools::{documented_tool_plan, PlannedTool, BROWSER_TOOLS, BUILTIN_TOOLS};
