//! Errors of `forge build` and `forge package`. Each names the file, the field or the thing, and
//! the fix, so the CLI can print it as is.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong while building the context or the image.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A value from forge.yaml or a SKILL.md cannot be used in the build.
    #[error("{file}: field `{field}`: {problem}\n  fix: {fix}")]
    Invalid {
        file: String,
        field: String,
        problem: String,
        fix: String,
    },

    /// The agent could not be loaded (forge.yaml or a skill is malformed).
    #[error("{0}")]
    Load(String),

    /// The security audit has error-level results; one line per skill and rule.
    #[error("security audit failed; the build stops here:\n{}\n  fix: change the skills (or the audit policy given with --policy) so `forge skills audit` passes", .reasons.iter().map(|r| format!("  - {r}")).collect::<Vec<_>>().join("\n"))]
    Audit { reasons: Vec<String> },

    /// `--prod` found configurations that must not ship.
    #[error("refusing a production build:\n{}", .problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Prod { problems: Vec<ProdProblem> },

    /// A file operation failed.
    #[error("{path}: {action}: {source}")]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The output directory exists, is not empty, and was not written by forge build.
    #[error("{0}: refusing to write the build output into a non-empty directory that has no forge build-manifest.json\n  fix: choose another directory with -o, or empty this one")]
    NotForgeOutput(PathBuf),

    /// Rendering Dockerfile.tmpl failed (a bug in the template).
    #[error("rendering Dockerfile.tmpl: {0}")]
    Template(String),

    /// No container builder is installed.
    #[error("no container builder found: looked for {} on PATH\n  fix: install one of them, or build the image elsewhere from the `forge build` output in {}: `docker build -t <tag> {}`", .searched.join(", "), .output_dir.display(), .output_dir.display())]
    NoBuilder {
        searched: Vec<String>,
        output_dir: PathBuf,
    },

    /// `--builder NAME` was given but NAME is not usable.
    #[error("builder `{name}`: {problem}\n  fix: {fix}")]
    Builder {
        name: String,
        problem: String,
        fix: String,
    },

    /// The builder ran and failed.
    #[error("`{command}` failed ({status})\n  fix: read the builder's output above; the build context is in {}", .context_dir.display())]
    BuilderFailed {
        command: String,
        status: String,
        context_dir: PathBuf,
    },

    /// The agent uses Lightpanda and its binary cannot be shipped (missing, a script wrapper,
    /// no version).
    #[error("Lightpanda for the image: {problem}\n  fix: {fix}")]
    Lightpanda { problem: String, fix: String },

    /// `--skip-build` without a previous build.
    #[error("{0}: no forge build output here (build-manifest.json is missing)\n  fix: run `forge build` first, or drop --skip-build")]
    MissingOutput(PathBuf),
}

impl BuildError {
    pub(crate) fn invalid(
        file: &str,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        BuildError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    pub(crate) fn io(
        path: impl Into<PathBuf>,
        action: &'static str,
        source: std::io::Error,
    ) -> Self {
        BuildError::Io {
            path: path.into(),
            action,
            source,
        }
    }
}

/// One reason a production build is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProdProblem {
    /// The file to change (forge.yaml or a SKILL.md).
    pub file: String,
    /// The field in that file.
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for ProdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  - {}: field `{}`: {}\n    fix: {}",
            self.file, self.field, self.problem, self.fix
        )
    }
}
