//! The SKILL.md format: typed front matter (`name`, `description`, `category`, `tags`, `icon`,
//! `metadata.forge`), the markdown body and its `## Tool:` sections, and the parser that turns a
//! file into a [`Skill`] or into diagnostics pointing at the offending YAML.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::NamedSource;
use serde::{Deserialize, Serialize};

use crate::yaml::{Doc, Kind, Node, Seg};
use crate::{Error, SourceDiagnostic};

/// Capabilities a skill may require. Anything else is an error at parse time.
pub const KNOWN_CAPABILITIES: &[&str] = &["browser"];

/// The tools the `browser` capability brings (forge-browser implements them; the runtime registers
/// them and `forge build` lists them only for agents with the capability). One list for every crate
/// that names them without depending on forge-browser; forge-runtime's tests check it against the
/// tools forge-browser really builds.
pub const BROWSER_TOOLS: &[&str] = &[
    "browser_navigate",
    "browser_state",
    "browser_click",
    "browser_fill",
    "browser_select",
    "browser_press",
    "browser_hover",
    "browser_back",
    "browser_tabs",
    "browser_extract",
    "browser_screenshot",
    "browser_pdf",
    "browser_drag",
    "browser_select_text",
    "browser_scroll",
    "browser_upload",
    "browser_close",
    "browser_handoff",
];

/// Where a skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillSource {
    /// Compiled into the forge binary (the repository's `skills/` folder).
    Embedded,
    /// A file in the agent's directory (or a directory given with `--dir`).
    Local,
}

impl std::fmt::Display for SkillSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkillSource::Embedded => "embedded",
            SkillSource::Local => "local",
        })
    }
}

/// A parsed SKILL.md.
#[derive(Debug, Clone, Serialize)]
pub struct Skill {
    /// `name:` from the front matter, else the skill's directory name (or file stem).
    pub name: String,
    pub description: String,
    pub category: Option<String>,
    /// Lowercase kebab-case, de-duplicated keeping the first occurrence.
    pub tags: Vec<String>,
    pub icon: Option<String>,
    /// The SKILL.md path (`embedded:<name>/SKILL.md` for embedded skills).
    pub path: PathBuf,
    /// The directory whose `scripts/` holds the skill's tool scripts: `skills/<name>/` for a skill
    /// folder, the skills directory itself for a flat `skills/<name>.md` (initializ/forge keeps
    /// their scripts in `skills/scripts/<tool>.sh`). `None` for embedded skills and the root
    /// skill file.
    pub dir: Option<PathBuf>,
    pub source: SkillSource,
    /// `metadata.forge`, if present.
    pub forge: Option<ForgeMeta>,
    /// Other `metadata` namespaces, kept as-is and otherwise ignored.
    pub other_metadata: BTreeMap<String, serde_json::Value>,
    /// `## Tool: <name>` sections of the body.
    pub tools: Vec<ToolSection>,
    /// The markdown after the front matter (the whole file when there is none).
    pub body: String,
    /// Executable files shipped with the skill (`scripts/` or anywhere in its directory).
    pub scripts: Vec<PathBuf>,
    /// Non-fatal problems (unknown keys in `metadata.forge`), each pointing at the key.
    #[serde(skip)]
    pub warnings: Vec<SourceDiagnostic>,
}

impl Skill {
    /// Capabilities this skill requires (empty without forge metadata).
    pub fn capabilities(&self) -> &[Capability] {
        self.forge
            .as_ref()
            .map(|f| f.requires.capabilities.as_slice())
            .unwrap_or(&[])
    }

    /// Whether the skill requires the headless browser.
    pub fn requires_browser(&self) -> bool {
        self.capabilities().contains(&Capability::Browser)
    }

    /// The browser engine the skill itself asks for (`requires.browser_engine`), if any.
    pub fn browser_engine(&self) -> Option<crate::BrowserEngine> {
        self.forge.as_ref().and_then(|f| f.requires.browser_engine)
    }

    /// A skill with forge metadata and no tool sections (it still contributes requirements).
    pub fn is_instructional(&self) -> bool {
        self.tools.is_empty()
    }
}

/// A known capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// The headless browser and its `browser_*` tools.
    Browser,
}

impl Capability {
    pub fn as_str(&self) -> &'static str {
        match self {
            Capability::Browser => "browser",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "browser" => Some(Capability::Browser),
            _ => None,
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metadata.forge` of a SKILL.md.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ForgeMeta {
    /// `script` (default) or `binary`.
    pub runtime: Option<String>,
    pub requires: Requires,
    pub uses: Vec<Use>,
    /// Exact hosts, `*.suffix` wildcards and `$VAR`/`${VAR}` references (expanded at run time),
    /// comma-split with empty entries dropped.
    pub egress_domains: Vec<String>,
    pub denied_tools: Vec<String>,
    pub workflow_phase: Option<String>,
    pub guardrails: Guardrails,
    pub trust_hints: TrustHints,
    /// Seconds.
    pub timeout_hint: Option<u64>,
    pub version: Option<String>,
}

/// `requires`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Requires {
    pub bins: Vec<BinRequirement>,
    pub env: EnvRequirements,
    pub capabilities: Vec<Capability>,
    /// `requires.browser_engine`: the engine this skill's browser tool calls run on (`None`: the
    /// agent's default, forge.yaml `browser.engine`). Only valid with `capabilities: [browser]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub browser_engine: Option<crate::BrowserEngine>,
}

/// A binary the skill needs: a bare name or a mapping with install hints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinRequirement {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub optional: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chmod: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<String>,
}

impl BinRequirement {
    /// How much install information the entry carries (aggregation keeps the richest).
    pub fn richness(&self) -> usize {
        [
            self.version.is_some(),
            self.apt.is_some(),
            self.apk.is_some(),
            self.url.is_some(),
            self.dest.is_some(),
            self.chmod.is_some(),
            !self.run.is_empty(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }
}

/// `requires.env`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvRequirements {
    #[serde(default)]
    pub required: Vec<String>,
    /// At least one of these must be set.
    #[serde(default)]
    pub one_of: Vec<String>,
    #[serde(default)]
    pub optional: Vec<String>,
}

/// An entry of `uses` (a dependency the skill calls: `{type: mcp, ref: mcp.linear, operations}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Use {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default)]
    pub operations: Vec<String>,
}

/// Where a guardrail rule was declared (for error messages about it later, e.g. a bad regex).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub skill: String,
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "skill \"{}\" ({}:{}:{})",
            self.skill,
            self.file.display(),
            self.line,
            self.column
        )
    }
}

/// A `{pattern, message}` rule (`deny_commands`, `deny_prompts`, `deny_responses`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternRule {
    /// A regular expression (validated by the runtime, which reports `origin` on failure).
    pub pattern: String,
    #[serde(default)]
    pub message: String,
    #[serde(skip_deserializing)]
    pub origin: Origin,
}

/// What to do with tool output matching a `deny_output` pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputAction {
    Block,
    Redact,
}

/// A `deny_output` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRule {
    pub pattern: String,
    pub action: OutputAction,
    #[serde(skip_deserializing)]
    pub origin: Origin,
}

/// `guardrails`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Guardrails {
    pub deny_commands: Vec<PatternRule>,
    pub deny_output: Vec<OutputRule>,
    pub deny_prompts: Vec<PatternRule>,
    pub deny_responses: Vec<PatternRule>,
    pub browser: BrowserGuardrails,
}

impl Guardrails {
    pub fn is_empty(&self) -> bool {
        self.deny_commands.is_empty()
            && self.deny_output.is_empty()
            && self.deny_prompts.is_empty()
            && self.deny_responses.is_empty()
    }
}

/// `guardrails.browser`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserGuardrails {
    /// Allow `browser_fill` into password/credit-card fields. Only honoured for a skill that
    /// itself declares the `browser` capability.
    #[serde(default)]
    pub allow_sensitive_fill: bool,
}

/// `trust_hints`: what the skill author says the skill needs. Hints only: they never grant
/// anything; the audit flags hints that contradict what the skill declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrustHints {
    pub network: Option<bool>,
    /// `None` when undeclared (absent or empty, as initializ/forge writes it).
    pub filesystem: Option<FilesystemAccess>,
    pub shell: Option<bool>,
}

/// `trust_hints.filesystem`: the access the skill author declares. initializ/forge writes a mode
/// string (`read`, `write`, `none`); forge also accepts a boolean, `true` meaning `write` (the
/// broadest claim, so a hint never understates access) and `false` meaning `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FilesystemAccess {
    None,
    Read,
    Write,
}

/// Values `trust_hints.filesystem` accepts as text.
pub const FILESYSTEM_MODES: &[&str] = &["read", "write", "none"];

impl FilesystemAccess {
    pub fn as_str(&self) -> &'static str {
        match self {
            FilesystemAccess::None => "none",
            FilesystemAccess::Read => "read",
            FilesystemAccess::Write => "write",
        }
    }

    /// Parse a mode string (`read`, `write`, `none`; case and surrounding space ignored).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Some(FilesystemAccess::None),
            "read" => Some(FilesystemAccess::Read),
            "write" => Some(FilesystemAccess::Write),
            _ => None,
        }
    }

    /// The mode a boolean hint stands for (see the type's docs).
    pub fn from_bool(b: bool) -> Self {
        if b {
            FilesystemAccess::Write
        } else {
            FilesystemAccess::None
        }
    }
}

impl std::fmt::Display for FilesystemAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `## Tool: <name>` section of the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSection {
    pub name: String,
    /// Paragraph text of the section, joined with spaces.
    pub description: String,
    /// `**Input:** ...`
    pub input: Option<String>,
    /// `**Output:** ...`
    pub output: Option<String>,
    /// `**Output format:** ...`
    pub output_format: Option<String>,
}

// ---- raw serde shapes --------------------------------------------------------------------------

#[derive(Deserialize, Default)]
struct RawFront {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    icon: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct RawForge {
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    requires: RawRequires,
    #[serde(default)]
    uses: Vec<Use>,
    #[serde(default)]
    egress_domains: Vec<String>,
    #[serde(default)]
    denied_tools: Vec<String>,
    #[serde(default)]
    workflow_phase: Option<String>,
    #[serde(default)]
    guardrails: RawGuardrails,
    #[serde(default)]
    trust_hints: RawTrustHints,
    #[serde(default)]
    timeout_hint: Option<u64>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawRequires {
    #[serde(default)]
    bins: Vec<RawBin>,
    #[serde(default)]
    env: EnvRequirements,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    browser_engine: Option<String>,
}

/// A `requires.bins` entry: a scalar (the name; numbers and booleans count as their text, as in
/// initializ/forge) or a mapping. Hand-written rather than `#[serde(untagged)]` so that a wrong
/// type inside the mapping keeps its own message and position.
enum RawBin {
    Name(String),
    Full(BinRequirement),
}

impl<'de> Deserialize<'de> for RawBin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawBin;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a binary name or a mapping {name, version, optional, apt, apk, url, dest, chmod, run}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawBin, E> {
                Ok(RawBin::Name(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RawBin, E> {
                Ok(RawBin::Name(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawBin, E> {
                Ok(RawBin::Name(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawBin, E> {
                Ok(RawBin::Name(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<RawBin, E> {
                Ok(RawBin::Name(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RawBin, E> {
                Ok(RawBin::Name(String::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawBin, A::Error> {
                use serde::de::Error as _;
                BinRequirement::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawBin::Full)
                    .map_err(|e| {
                        if e.to_string().contains("missing field `name`") {
                            A::Error::custom("expected a binary name (`- jq`) or a mapping with `name` (`- {name: jq, apt: jq}`)")
                        } else {
                            e
                        }
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// `trust_hints` as written: `filesystem` is a mode string or a boolean.
#[derive(Deserialize, Default)]
struct RawTrustHints {
    #[serde(default)]
    network: Option<bool>,
    #[serde(default)]
    filesystem: Option<RawFilesystem>,
    #[serde(default)]
    shell: Option<bool>,
}

/// `trust_hints.filesystem` before validation (the text is checked in `build_forge`, with a span).
enum RawFilesystem {
    Text(String),
    Flag(bool),
}

impl<'de> Deserialize<'de> for RawFilesystem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawFilesystem;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("`read`, `write`, `none` or a boolean")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawFilesystem, E> {
                Ok(RawFilesystem::Text(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RawFilesystem, E> {
                Ok(RawFilesystem::Flag(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RawFilesystem, E> {
                Ok(RawFilesystem::Text(String::new()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Default)]
struct RawGuardrails {
    #[serde(default)]
    deny_commands: Vec<PatternRule>,
    #[serde(default)]
    deny_output: Vec<OutputRule>,
    #[serde(default)]
    deny_prompts: Vec<PatternRule>,
    #[serde(default)]
    deny_responses: Vec<PatternRule>,
    #[serde(default)]
    browser: BrowserGuardrails,
}

// ---- parsing -----------------------------------------------------------------------------------

/// How a SKILL.md starts.
pub(crate) enum Front<'a> {
    /// No front matter: the whole file is body.
    None,
    /// Front matter YAML (with its byte offset in the file) and the body after it.
    Yaml(&'a str, usize, &'a str),
    /// An opening `---` line (at this byte offset) with no closing `---` line.
    Unclosed(usize),
}

/// Split `content` at its front matter: a first line `---` (after blank lines and a UTF-8 BOM)
/// closed by another `---` line.
pub(crate) fn split_front_matter(content: &str) -> Front<'_> {
    let lead = content.len()
        - content
            .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
            .len();
    let rest = &content[lead..];
    let first_line = rest.split('\n').next().unwrap_or("");
    if first_line.trim_end() != "---" {
        return Front::None;
    }
    let Some(first_nl) = rest.find('\n') else {
        return Front::Unclosed(lead);
    };
    let fm_start = lead + first_nl + 1;
    let mut pos = fm_start;
    for line in content[fm_start..].split_inclusive('\n') {
        if line.trim() == "---" {
            let yaml = &content[fm_start..pos];
            let body = &content[pos + line.len()..];
            return Front::Yaml(yaml, fm_start, body);
        }
        pos += line.len();
    }
    Front::Unclosed(lead)
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Parse SKILL.md `content` read from `path`.
///
/// `default_name` is used when the front matter has no `name` (the directory or file stem).
pub fn parse_skill(
    content: &str,
    path: &Path,
    default_name: &str,
    source: SkillSource,
) -> Result<Skill, Error> {
    let src = Arc::new(
        NamedSource::new(path.display().to_string(), content.to_string()).with_language("yaml"),
    );
    let (front, body) = match split_front_matter(content) {
        Front::None => (None, content),
        Front::Yaml(yaml, base, body) => (Some((yaml, base)), body),
        Front::Unclosed(at) => {
            return Err(Error::Invalid {
                path: path.to_path_buf(),
                problems: vec![SourceDiagnostic::new(
                    path,
                    &src,
                    "forge::skill::unclosed-front-matter",
                    "SKILL.md front matter is not closed: the `---` line opening it has no closing `---` line",
                    (at, at + 3),
                    "front matter opens here",
                    Some("add a line with only `---` after the YAML, before the markdown body".into()),
                )],
            });
        }
    };
    let mut skill = Skill {
        name: default_name.to_string(),
        description: String::new(),
        category: None,
        tags: Vec::new(),
        icon: None,
        path: path.to_path_buf(),
        dir: None,
        source,
        forge: None,
        other_metadata: BTreeMap::new(),
        tools: parse_tool_sections(body),
        body: body.trim().to_string(),
        scripts: Vec::new(),
        warnings: Vec::new(),
    };
    let Some((yaml, base)) = front else {
        return Ok(skill);
    };
    let invalid = |problems: Vec<SourceDiagnostic>| Error::Invalid {
        path: path.to_path_buf(),
        problems,
    };
    let doc = Doc::new(path, src, base, yaml).map_err(|d| invalid(vec![*d]))?;
    if yaml.trim().is_empty() {
        return Ok(skill);
    }
    if !matches!(doc.tree.kind, Kind::Map(_)) {
        return Err(invalid(vec![doc.diag(
            "forge::skill::front-matter",
            "SKILL.md front matter is not a YAML mapping",
            &[],
            "expected `key: value` lines",
            Some("front matter looks like `name: my-skill` / `description: ...` between two `---` lines".into()),
        )]));
    }
    let raw: RawFront = serde_norway::from_str(yaml)
        .map_err(|e| invalid(vec![doc.serde_error(&e, "SKILL.md front matter")]))?;

    let mut problems = Vec::new();
    if let Some(name) = raw.name.filter(|n| !n.trim().is_empty()) {
        skill.name = name.trim().to_string();
    }
    skill.description = raw.description.unwrap_or_default().trim().to_string();
    skill.icon = raw.icon.filter(|s| !s.is_empty());
    if let Some(cat) = raw.category.filter(|c| !c.is_empty()) {
        let lower = cat.to_lowercase();
        if is_kebab(&lower) {
            skill.category = Some(lower);
        } else {
            problems.push(doc.diag(
                "forge::skill::invalid-category",
                format!("invalid category \"{cat}\": must be lowercase kebab-case"),
                &[Seg::Key("category")],
                "not kebab-case",
                Some("use lowercase letters, digits and single dashes, e.g. `sre` or `dev-tools`".into()),
            ));
        }
    }
    for (i, tag) in raw.tags.iter().enumerate() {
        let lower = tag.to_lowercase();
        if !is_kebab(&lower) {
            problems.push(doc.diag(
                "forge::skill::invalid-tag",
                format!("invalid tag \"{tag}\": must be lowercase kebab-case"),
                &[Seg::Key("tags"), Seg::Index(i)],
                "not kebab-case",
                Some("use lowercase letters, digits and single dashes, e.g. `kubernetes` or `incident-response`".into()),
            ));
        } else if !skill.tags.contains(&lower) {
            skill.tags.push(lower);
        }
    }

    let mut metadata = raw.metadata;
    if let Some(forge_val) = metadata.remove("forge") {
        let raw_forge = if forge_val.is_null() {
            RawForge::default()
        } else {
            // Deserialize the forge namespace from the YAML text (not from the JSON value) so that
            // serde errors keep their line and column.
            deserialize_forge(&doc, yaml).map_err(|d| invalid(vec![*d]))?
        };
        skill.warnings = unknown_forge_keys(&doc);
        let forge = build_forge(raw_forge, &doc, &skill.name, &mut problems);
        skill.warnings.extend(unknown_use_types(&forge, &doc));
        skill.forge = Some(forge);
    }
    skill.other_metadata = metadata;

    if problems.is_empty() {
        Ok(skill)
    } else {
        Err(invalid(problems))
    }
}

/// Deserialize `metadata.forge` from the front matter text with positions intact.
fn deserialize_forge(doc: &Doc<'_>, yaml: &str) -> Result<RawForge, Box<SourceDiagnostic>> {
    #[derive(Deserialize)]
    struct Outer {
        #[serde(default)]
        metadata: Option<Meta>,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        forge: Option<RawForge>,
    }
    let outer: Outer = serde_norway::from_str(yaml)
        .map_err(|e| Box::new(doc.serde_error(&e, "SKILL.md front matter")))?;
    Ok(outer.metadata.and_then(|m| m.forge).unwrap_or_default())
}

fn build_forge(
    raw: RawForge,
    doc: &Doc<'_>,
    skill: &str,
    problems: &mut Vec<SourceDiagnostic>,
) -> ForgeMeta {
    const F: [Seg<'static>; 2] = [Seg::Key("metadata"), Seg::Key("forge")];
    let at = |rest: &[Seg<'static>]| -> Vec<Seg<'static>> {
        let mut v = F.to_vec();
        v.extend_from_slice(rest);
        v
    };
    let origin = |path: Vec<Seg<'static>>| -> Origin {
        let (start, _) = doc.locate(&path);
        let (line, column) = crate::error::line_col(doc.src.inner(), start);
        Origin {
            skill: skill.to_string(),
            file: doc.path.to_path_buf(),
            line,
            column,
        }
    };

    let mut capabilities = Vec::new();
    for (i, cap) in raw.requires.capabilities.iter().enumerate() {
        match Capability::parse(cap.trim()) {
            Some(c) => {
                if !capabilities.contains(&c) {
                    capabilities.push(c)
                }
            }
            None => problems.push(doc.diag(
                "forge::skill::unknown-capability",
                format!(
                    "unknown capability \"{cap}\" in requires.capabilities (known: {})",
                    KNOWN_CAPABILITIES.join(", ")
                ),
                &at(&[
                    Seg::Key("requires"),
                    Seg::Key("capabilities"),
                    Seg::Index(i),
                ]),
                "unknown capability",
                Some(format!(
                    "known capabilities: {}{}",
                    KNOWN_CAPABILITIES.join(", "),
                    suggest(cap, KNOWN_CAPABILITIES)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default()
                )),
            )),
        }
    }

    let browser_engine = raw.requires.browser_engine.as_deref().and_then(|e| {
        let path = at(&[Seg::Key("requires"), Seg::Key("browser_engine")]);
        let Some(engine) = crate::BrowserEngine::parse(e.trim()) else {
            let names = crate::BrowserEngine::NAMES;
            problems.push(doc.diag(
                "forge::skill::unknown-browser-engine",
                format!(
                    "unknown browser engine \"{e}\" in requires.browser_engine (known: {})",
                    names.join(", ")
                ),
                &path,
                "not a known engine",
                Some(format!(
                    "write `browser_engine: chromium` (every browser tool) or `browser_engine: lightpanda` (fast reading and simple forms; see docs/browser.md, \"Engines\"), or remove it for forge.yaml's `browser.engine`{}",
                    suggest(&e.trim().to_ascii_lowercase(), &names)
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default()
                )),
            ));
            return None;
        };
        if !capabilities.contains(&Capability::Browser) {
            problems.push(doc.diag(
                "forge::skill::browser-engine-without-browser",
                format!(
                    "requires.browser_engine is {} but the skill does not require the browser",
                    engine.name()
                ),
                &path,
                "no `browser` in requires.capabilities",
                Some("add `capabilities: [browser]` under requires, or remove browser_engine".into()),
            ));
            return None;
        }
        Some(engine)
    });

    let mut bins = Vec::new();
    for (i, b) in raw.requires.bins.into_iter().enumerate() {
        let bin = match b {
            RawBin::Name(name) => BinRequirement {
                name,
                ..Default::default()
            },
            RawBin::Full(full) => full,
        };
        if bin.name.trim().is_empty() {
            problems.push(doc.diag(
                "forge::skill::empty-bin",
                "requires.bins entry has an empty name",
                &at(&[Seg::Key("requires"), Seg::Key("bins"), Seg::Index(i)]),
                "empty binary name",
                Some("give the binary name, e.g. `- jq` or `- {name: jq, apt: jq}`".into()),
            ));
            continue;
        }
        bins.push(bin);
    }

    let mut egress_domains = Vec::new();
    for (i, entry) in raw.egress_domains.iter().enumerate() {
        for d in entry.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            if let Some(why) = egress_entry_problem(d) {
                problems.push(doc.diag_within(
                    "forge::skill::invalid-egress-domain",
                    format!("invalid egress_domains entry \"{d}\": {why}"),
                    &at(&[Seg::Key("egress_domains"), Seg::Index(i)]),
                    d,
                    why,
                    Some("write a host (`api.example.com`), a wildcard (`*.example.com`), an optional `:port`, or `$VAR`".into()),
                ));
                continue;
            }
            egress_domains.push(d.to_string());
        }
    }

    if let Some(t) = raw.timeout_hint {
        if t == 0 {
            problems.push(doc.diag(
                "forge::skill::timeout-hint",
                "timeout_hint must be a positive number of seconds",
                &at(&[Seg::Key("timeout_hint")]),
                "zero",
                Some("remove timeout_hint to use the default, or give seconds, e.g. `timeout_hint: 120`".into()),
            ));
        }
    }

    let th = raw.trust_hints;
    let filesystem = match th.filesystem {
        None => None,
        Some(RawFilesystem::Flag(b)) => Some(FilesystemAccess::from_bool(b)),
        Some(RawFilesystem::Text(t)) if t.trim().is_empty() => None,
        Some(RawFilesystem::Text(t)) => match FilesystemAccess::parse(&t) {
            Some(mode) => Some(mode),
            None => {
                problems.push(doc.diag(
                    "forge::skill::invalid-filesystem-hint",
                    format!(
                        "invalid trust_hints.filesystem \"{t}\" (known: {}, or a boolean)",
                        FILESYSTEM_MODES.join(", ")
                    ),
                    &at(&[Seg::Key("trust_hints"), Seg::Key("filesystem")]),
                    "not a filesystem mode",
                    Some(format!(
                        "write `read`, `write` or `none` (`true` counts as write, `false` as none){}",
                        suggest(&t.trim().to_ascii_lowercase(), FILESYSTEM_MODES)
                            .map(|s| format!("; did you mean `{s}`?"))
                            .unwrap_or_default()
                    )),
                ));
                None
            }
        },
    };
    let trust_hints = TrustHints {
        network: th.network,
        filesystem,
        shell: th.shell,
    };

    let g = raw.guardrails;
    let cmd_rules =
        |rules: Vec<PatternRule>, key: &'static str, problems: &mut Vec<SourceDiagnostic>| {
            rules
                .into_iter()
                .enumerate()
                .filter_map(|(i, mut r)| {
                    let path = at(&[
                        Seg::Key("guardrails"),
                        Seg::Key(key),
                        Seg::Index(i),
                        Seg::Key("pattern"),
                    ]);
                    if !check_pattern(doc, &path, key, i, &r.pattern, problems) {
                        return None;
                    }
                    r.origin = origin(path);
                    Some(r)
                })
                .collect::<Vec<_>>()
        };
    let deny_commands = cmd_rules(g.deny_commands, "deny_commands", problems);
    let deny_prompts = cmd_rules(g.deny_prompts, "deny_prompts", problems);
    let deny_responses = cmd_rules(g.deny_responses, "deny_responses", problems);
    let deny_output = g
        .deny_output
        .into_iter()
        .enumerate()
        .filter_map(|(i, mut r)| {
            let path = at(&[
                Seg::Key("guardrails"),
                Seg::Key("deny_output"),
                Seg::Index(i),
                Seg::Key("pattern"),
            ]);
            if !check_pattern(doc, &path, "deny_output", i, &r.pattern, problems) {
                return None;
            }
            r.origin = origin(path);
            Some(r)
        })
        .collect();

    ForgeMeta {
        runtime: raw.runtime,
        requires: Requires {
            bins,
            env: raw.requires.env,
            capabilities,
            browser_engine,
        },
        uses: raw.uses,
        egress_domains,
        denied_tools: raw.denied_tools,
        workflow_phase: raw.workflow_phase,
        guardrails: Guardrails {
            deny_commands,
            deny_output,
            deny_prompts,
            deny_responses,
            browser: g.browser,
        },
        trust_hints,
        timeout_hint: raw.timeout_hint,
        version: raw.version,
    }
}

/// Why an egress entry is not a host pattern (`None` when it is fine). Full validation
/// (normalisation, IDN) happens in forge-egress; this catches URLs and typos early, with a span.
fn egress_entry_problem(d: &str) -> Option<&'static str> {
    if let Some(var) = d.strip_prefix('$') {
        let name = var
            .strip_prefix('{')
            .and_then(|v| v.strip_suffix('}'))
            .unwrap_or(var);
        let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        return (!ok).then_some("not a valid $VAR / ${VAR} reference");
    }
    if d.contains("://") || d.contains('/') {
        return Some("looks like a URL; give the host only");
    }
    if d.chars()
        .any(|c| c.is_whitespace() || c == '@' || c == '?' || c == '#')
    {
        return Some("not a host name");
    }
    let host = d.strip_prefix("*.").unwrap_or(d);
    if host.contains('*') {
        return Some("a wildcard is allowed only as a leading `*.`");
    }
    let host = match host.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') => {
            if port.parse::<u16>().map_or(true, |p| p == 0) {
                return Some("the port must be a number from 1 to 65535");
            }
            h
        }
        _ => host,
    };
    if host.is_empty() || host.starts_with('.') || host.contains("..") {
        return Some("not a host name");
    }
    None
}

/// Check a guardrail pattern: non-empty and a valid regular expression. Records a diagnostic at
/// the pattern and returns false otherwise.
fn check_pattern(
    doc: &Doc<'_>,
    path: &[Seg<'_>],
    key: &str,
    i: usize,
    pattern: &str,
    problems: &mut Vec<SourceDiagnostic>,
) -> bool {
    if pattern.is_empty() {
        problems.push(doc.diag(
            "forge::skill::empty-pattern",
            format!("guardrails.{key}[{i}] has an empty pattern"),
            path,
            "empty pattern",
            Some("give a regular expression, or remove the rule".into()),
        ));
        return false;
    }
    // Parse only (no compilation): catches every syntax error cheaply; the runtime compiles the
    // pattern and reports a size-limit failure with the rule's origin.
    match regex_syntax::ParserBuilder::new().build().parse(pattern) {
        Ok(_) => true,
        Err(e) => {
            let detail = e
                .to_string()
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid")
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            problems.push(doc.diag(
                "forge::skill::invalid-pattern",
                format!("invalid regular expression in guardrails.{key}[{i}].pattern: {detail}"),
                path,
                detail,
                Some("fix the regular expression (Rust regex syntax, like RE2); in single-quoted YAML a backslash needs no escaping".into()),
            ));
            false
        }
    }
}

/// The known value closest to `got` (edit distance at most 2), for "did you mean" hints.
pub(crate) fn suggest<'a>(got: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(got, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Extract `## Tool: <name>` sections (`**Input:**`, `**Output:**`, `**Output format:**` lines,
/// other paragraph text as the description). Another heading ends a section.
pub fn parse_tool_sections(body: &str) -> Vec<ToolSection> {
    let mut out = Vec::new();
    let mut cur: Option<ToolSection> = None;
    let mut in_fence = false;
    for line in body.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(name) = t.strip_prefix("## Tool:") {
                if let Some(s) = cur.take() {
                    out.push(s);
                }
                let name = name.trim();
                if !name.is_empty() {
                    cur = Some(ToolSection {
                        name: name.to_string(),
                        description: String::new(),
                        input: None,
                        output: None,
                        output_format: None,
                    });
                }
                continue;
            }
            if t.starts_with('#') {
                if let Some(s) = cur.take() {
                    out.push(s);
                }
                continue;
            }
        }
        let Some(s) = cur.as_mut() else { continue };
        if let Some(v) = t.strip_prefix("**Input:**") {
            s.input = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("**Output format:**") {
            s.output_format = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("**Output:**") {
            s.output = Some(v.trim().to_string());
        } else if !t.is_empty() {
            if !s.description.is_empty() {
                s.description.push(' ');
            }
            s.description.push_str(t);
        }
    }
    if let Some(s) = cur {
        out.push(s);
    }
    out
}

/// Known keys of each mapping under `metadata.forge` (unknown ones become warnings, since
/// initializ/forge ignores them silently and a typo would otherwise lose a requirement).
const FORGE_KEYS: &[(&[&str], &[&str])] = &[
    (
        &[],
        &[
            "runtime",
            "requires",
            "uses",
            "egress_domains",
            "denied_tools",
            "workflow_phase",
            "guardrails",
            "trust_hints",
            "timeout_hint",
            "version",
        ],
    ),
    (
        &["requires"],
        &["bins", "env", "capabilities", "browser_engine"],
    ),
    (&["requires", "env"], &["required", "one_of", "optional"]),
    (
        &["guardrails"],
        &[
            "deny_commands",
            "deny_output",
            "deny_prompts",
            "deny_responses",
            "browser",
        ],
    ),
    (&["guardrails", "browser"], &["allow_sensitive_fill"]),
    (&["trust_hints"], &["network", "filesystem", "shell"]),
];

/// Known keys of the mappings inside each list under `metadata.forge` (`requires.bins` entries in
/// mapping form, `uses` entries, guardrail rules).
const FORGE_ITEM_KEYS: &[(&[&str], &[&str])] = &[
    (
        &["requires", "bins"],
        &[
            "name", "version", "optional", "apt", "apk", "url", "dest", "chmod", "run",
        ],
    ),
    (&["uses"], &["type", "ref", "operations"]),
    (&["guardrails", "deny_commands"], &["pattern", "message"]),
    (&["guardrails", "deny_output"], &["pattern", "action"]),
    (&["guardrails", "deny_prompts"], &["pattern", "message"]),
    (&["guardrails", "deny_responses"], &["pattern", "message"]),
];

/// `uses[].type` values forge understands: initializ/forge's `binary` and `mcp` (declarations the
/// platform resolves), and forge's `skill` (activates an embedded skill).
pub const USE_TYPES: &[&str] = &["binary", "mcp", "skill"];

/// A warning for each `uses` entry whose `type` is none of [`USE_TYPES`] (initializ/forge does
/// not gate on it either, so the skill still loads; a typo such as `skil` is named).
fn unknown_use_types(forge: &ForgeMeta, doc: &Doc<'_>) -> Vec<SourceDiagnostic> {
    let mut out = Vec::new();
    for (i, u) in forge.uses.iter().enumerate() {
        if USE_TYPES.contains(&u.kind.as_str()) {
            continue;
        }
        out.push(
            doc.diag(
                "forge::skill::unknown-use-type",
                format!(
                    "unknown uses[{i}].type \"{}\" (known: {})",
                    u.kind,
                    USE_TYPES.join(", ")
                ),
                &[
                    Seg::Key("metadata"),
                    Seg::Key("forge"),
                    Seg::Key("uses"),
                    Seg::Index(i),
                    Seg::Key("type"),
                ],
                "not a known dependency type; kept as a declaration only",
                Some(format!(
                    "use `binary` or `mcp` (declarations), or `skill` to activate an embedded skill{}",
                    suggest(&u.kind, USE_TYPES)
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default()
                )),
            )
            .warning(),
        );
    }
    out
}

fn unknown_forge_keys(doc: &Doc<'_>) -> Vec<SourceDiagnostic> {
    let mut out = Vec::new();
    for (sub, known) in FORGE_ITEM_KEYS {
        let mut path = vec![Seg::Key("metadata"), Seg::Key("forge")];
        path.extend(sub.iter().map(|k| Seg::Key(k)));
        let Some(Node {
            kind: Kind::Seq(items),
            ..
        }) = doc.tree.get(&path)
        else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            for (key, key_node) in item.map_keys() {
                if known.contains(&key) {
                    continue;
                }
                let dotted = format!("metadata.forge.{}[{i}]", sub.join("."));
                out.push(
                    doc.key_diag(
                        "forge::skill::unknown-key",
                        format!("unknown key `{key}` in {dotted}"),
                        key_node,
                        "not a known key; ignored",
                        Some(format!(
                            "known keys here: {}{}",
                            known.join(", "),
                            suggest(key, known)
                                .map(|s| format!(" (did you mean `{s}`?)"))
                                .unwrap_or_default()
                        )),
                    )
                    .warning(),
                );
            }
        }
    }
    for (sub, known) in FORGE_KEYS {
        let mut path = vec![Seg::Key("metadata"), Seg::Key("forge")];
        path.extend(sub.iter().map(|k| Seg::Key(k)));
        let Some(node) = doc.tree.get(&path) else {
            continue;
        };
        for (key, key_node) in node.map_keys() {
            if known.contains(&key) {
                continue;
            }
            let dotted: Vec<&str> = ["metadata", "forge"]
                .iter()
                .chain(sub.iter())
                .copied()
                .collect();
            out.push(
                doc.key_diag(
                    "forge::skill::unknown-key",
                    format!("unknown key `{key}` in {}", dotted.join(".")),
                    key_node,
                    "not a known key; ignored",
                    Some(format!(
                        "known keys here: {}{}",
                        known.join(", "),
                        suggest(key, known)
                            .map(|s| format!(" (did you mean `{s}`?)"))
                            .unwrap_or_default()
                    )),
                )
                .warning(),
            );
        }
    }
    out
}
