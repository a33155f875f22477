//! Errors and diagnostics of this crate.
//!
//! Every problem found in a file is a [`SourceDiagnostic`]: the file (as a miette `NamedSource`),
//! a labeled byte span at the offending YAML, a stable code (`forge::skill::unknown-capability`),
//! and a hint saying how to fix it. [`Error`] wraps those together with I/O and discovery errors.
//! Warnings (unknown forge.yaml keys) use the same type with `Severity::Warning`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, Severity, SourceCode, SourceSpan};

/// One problem in one file, pointing at the offending text.
#[derive(Debug, Clone)]
pub struct SourceDiagnostic {
    /// What is wrong, e.g. `unknown capability "browsr" in requires.capabilities`.
    pub message: String,
    /// A stable machine-readable code, e.g. `forge::skill::unknown-capability`.
    pub code: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// The file this is about.
    pub path: PathBuf,
    /// 1-based line of the span start.
    pub line: usize,
    /// 1-based column (in characters) of the span start.
    pub column: usize,
    /// Label shown under the span.
    pub label: String,
    /// How to fix it.
    pub help: Option<String>,
    span: SourceSpan,
    src: Arc<NamedSource<String>>,
}

impl SourceDiagnostic {
    /// A diagnostic at byte range `start..end` of `text` (the full file content).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        path: &Path,
        text: &Arc<NamedSource<String>>,
        code: &'static str,
        message: impl Into<String>,
        (start, end): (usize, usize),
        label: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        let full = text.inner();
        let start = floor_char_boundary(full, start.min(full.len()));
        let end = floor_char_boundary(full, end.clamp(start, full.len()));
        let (line, column) = line_col(full, start);
        Self {
            message: message.into(),
            code,
            severity: Severity::Error,
            path: path.to_path_buf(),
            line,
            column,
            label: label.into(),
            help,
            span: SourceSpan::new(start.into(), end - start),
            src: text.clone(),
        }
    }

    /// A diagnostic for a serde_norway error in the YAML file `path` with content `text`
    /// (for other crates' YAML files, e.g. the audit policy). `what` names the format.
    pub fn from_yaml_error(path: &Path, text: &str, err: &serde_norway::Error, what: &str) -> Self {
        let src = Arc::new(
            NamedSource::new(path.display().to_string(), text.to_string()).with_language("yaml"),
        );
        match crate::yaml::Doc::new(path, src, 0, text) {
            Ok(doc) => doc.serde_error(err, what),
            Err(d) => *d,
        }
    }

    /// The same diagnostic shown over `src`, a text of the same length (e.g. with a refused
    /// credential blanked out).
    pub(crate) fn with_source(mut self, src: Arc<NamedSource<String>>) -> Self {
        self.src = src;
        self
    }

    pub(crate) fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }

    /// The byte span in the file.
    pub fn span(&self) -> SourceSpan {
        self.span
    }

    /// `file:line:column`.
    pub fn location(&self) -> String {
        format!("{}:{}:{}", self.path.display(), self.line, self.column)
    }
}

impl std::fmt::Display for SourceDiagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SourceDiagnostic {}

impl Diagnostic for SourceDiagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }
    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&*self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(self.label.clone()),
            self.span,
        ))))
    }
}

/// Everything that can go wrong loading skills and agents.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    /// (The I/O error is part of the message, not a `source()`, so that renderers do not print
    /// it twice.)
    #[error("cannot read {}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A file has one or more problems; each points at its text.
    #[error("{}", invalid_message(.problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<SourceDiagnostic>,
    },
    /// A symlink inside the skills directory points outside it.
    #[error("refusing symlink {} -> {}: it leaves the skills directory {}", link.display(), target.display(), skills_dir.display())]
    SymlinkEscape {
        link: PathBuf,
        target: PathBuf,
        skills_dir: PathBuf,
    },
    /// Two active skills have the same name.
    #[error("duplicate skill name \"{name}\": {} and {}", first.display(), second.display())]
    DuplicateSkill {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// forge.yaml names an embedded skill that does not exist.
    #[error("unknown embedded skill \"{name}\" referenced by {}", referenced_by.display())]
    UnknownEmbedded {
        name: String,
        referenced_by: PathBuf,
        known: Vec<String>,
    },
}

fn invalid_message(problems: &[SourceDiagnostic]) -> String {
    match problems {
        [] => "invalid file".to_string(),
        [one] => format!("{}: {}", one.location(), one.message),
        [first, rest @ ..] => format!(
            "{}: {} (and {} more problem{})",
            first.location(),
            first.message,
            rest.len(),
            if rest.len() == 1 { "" } else { "s" }
        ),
    }
}

impl Diagnostic for Error {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let code = match self {
            Error::Io { .. } => "forge::io",
            Error::Invalid { problems, .. } => match problems.first() {
                Some(p) => p.code,
                None => "forge::invalid",
            },
            Error::SymlinkEscape { .. } => "forge::skill::symlink-escape",
            Error::DuplicateSkill { .. } => "forge::skill::duplicate-name",
            Error::UnknownEmbedded { .. } => "forge::skill::unknown-embedded",
        };
        Some(Box::new(code))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let help: String = match self {
            Error::Io { path, .. } => format!(
                "check that {} exists and is readable (for an agent, run forge in the directory holding forge.yaml or pass --config)",
                path.display()
            ),
            Error::Invalid { problems, .. } => return problems.first()?.help(),
            Error::SymlinkEscape { .. } => {
                "copy the skill into the skills directory instead of linking to it".to_string()
            }
            Error::DuplicateSkill { .. } => {
                "rename one of the skills (the `name:` field or its directory)".to_string()
            }
            Error::UnknownEmbedded { known, .. } => {
                format!("embedded skills: {}", known.join(", "))
            }
        };
        Some(Box::new(help))
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        match self {
            Error::Invalid { problems, .. } => problems.first()?.source_code(),
            _ => None,
        }
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self {
            Error::Invalid { problems, .. } => problems.first()?.labels(),
            _ => None,
        }
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self {
            Error::Invalid { problems, .. } if problems.len() > 1 => {
                Some(Box::new(problems[1..].iter().map(|p| p as &dyn Diagnostic)))
            }
            _ => None,
        }
    }
}

impl Error {
    /// The individual problems (one for I/O and discovery errors).
    pub fn problems(&self) -> &[SourceDiagnostic] {
        match self {
            Error::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

/// 1-based line and column (in characters) of byte offset `at`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..floor_char_boundary(text, at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

pub(crate) fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
