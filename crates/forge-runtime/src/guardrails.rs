//! Skill guardrails, compiled once at startup and applied on every tool call, prompt and reply.
//!
//! - `deny_commands`: tool input. Checked against the raw JSON text of the input, against every
//!   decoded string value (and object key) in it, so JSON escapes such as `\u0072m` cannot hide a
//!   word, and, for command-shaped inputs (`binary`/`command` plus `args`), against the command
//!   line joined with spaces.
//! - `deny_output`: tool output. `block` rules first (any match refuses the whole output), then
//!   `redact` rules replace every match with [`REDACTED`]. Applied to the text the model sees and
//!   to every string in the structured data, so browser observations and extracts are covered.
//! - `deny_prompts`: the user message. `deny_responses`: the model's reply.
//!
//! A hit is a [`GuardrailHit`]; the tool runner turns it into a tool error the model sees (the task
//! goes on). An invalid regular expression is a [`GuardrailError`] at startup naming the skill, the
//! file and the line of the rule.

use std::path::PathBuf;

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// What redacted text is replaced with.
pub const REDACTED: &str = "[REDACTED BY POLICY]";

/// Compiled-size limit for one pattern (guards against patterns that blow up when compiled).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Which list a rule came from.
// The variants are the SKILL.md field names (`deny_commands`, ...), serialized snake_case into
// audit events, so they share the prefix on purpose.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    DenyCommands,
    DenyOutput,
    DenyPrompts,
    DenyResponses,
}

impl RuleKind {
    /// The field name in SKILL.md.
    pub fn field(self) -> &'static str {
        match self {
            RuleKind::DenyCommands => "deny_commands",
            RuleKind::DenyOutput => "deny_output",
            RuleKind::DenyPrompts => "deny_prompts",
            RuleKind::DenyResponses => "deny_responses",
        }
    }
}

/// Where a rule was declared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleOrigin {
    pub skill: String,
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl From<&forge_skills::Origin> for RuleOrigin {
    fn from(o: &forge_skills::Origin) -> Self {
        Self {
            skill: o.skill.clone(),
            file: o.file.clone(),
            line: o.line,
            column: o.column,
        }
    }
}

impl std::fmt::Display for RuleOrigin {
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

/// A pattern that failed to compile.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "invalid guardrail regex in {origin}: guardrails.{field} pattern {pattern:?}: {reason}\n  \
     fix: correct the pattern in that SKILL.md (Rust regex syntax; escape \\ as \\\\ inside YAML double quotes)"
)]
pub struct GuardrailError {
    pub origin: Box<RuleOrigin>,
    pub field: &'static str,
    pub pattern: String,
    pub reason: String,
}

/// A rule that matched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{message} ({field} rule of skill {skill})")]
pub struct GuardrailHit {
    pub kind: RuleKind,
    pub field: &'static str,
    pub skill: String,
    pub pattern: String,
    /// The rule's message, or a default naming what was refused.
    pub message: String,
}

#[derive(Debug, Clone)]
struct Rule {
    kind: RuleKind,
    regex: Regex,
    message: String,
    origin: RuleOrigin,
}

impl Rule {
    fn compile(
        kind: RuleKind,
        pattern: &str,
        message: &str,
        origin: RuleOrigin,
    ) -> Result<Rule, GuardrailError> {
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| GuardrailError {
                origin: Box::new(origin.clone()),
                field: kind.field(),
                pattern: pattern.to_string(),
                reason: e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or("invalid pattern")
                    .trim()
                    .to_string(),
            })?;
        let message = if message.trim().is_empty() {
            match kind {
                RuleKind::DenyCommands => "tool input refused by a guardrail".to_string(),
                RuleKind::DenyOutput => "tool output withheld by a guardrail".to_string(),
                RuleKind::DenyPrompts => "message refused by a guardrail".to_string(),
                RuleKind::DenyResponses => "reply withheld by a guardrail".to_string(),
            }
        } else {
            message.trim().to_string()
        };
        Ok(Rule {
            kind,
            regex,
            message,
            origin,
        })
    }

    fn hit(&self) -> GuardrailHit {
        GuardrailHit {
            kind: self.kind,
            field: self.kind.field(),
            skill: self.origin.skill.clone(),
            pattern: self.regex.as_str().to_string(),
            message: self.message.clone(),
        }
    }
}

/// The result of a passing output check.
#[derive(Debug, Clone, PartialEq)]
pub struct Redacted<T> {
    pub value: T,
    /// How many matches were replaced with [`REDACTED`].
    pub redactions: usize,
}

/// The compiled guardrails of an agent.
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    commands: Vec<Rule>,
    output_block: Vec<Rule>,
    output_redact: Vec<Rule>,
    prompts: Vec<Rule>,
    responses: Vec<Rule>,
}

impl Guardrails {
    /// No rules.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Compile the aggregated guardrails of the agent's skills.
    pub fn from_skills(g: &forge_skills::Guardrails) -> Result<Self, GuardrailError> {
        let mut out = Self::default();
        for r in &g.deny_commands {
            out.commands.push(Rule::compile(
                RuleKind::DenyCommands,
                &r.pattern,
                &r.message,
                (&r.origin).into(),
            )?);
        }
        for r in &g.deny_output {
            let rule = Rule::compile(RuleKind::DenyOutput, &r.pattern, "", (&r.origin).into())?;
            match r.action {
                forge_skills::OutputAction::Block => out.output_block.push(rule),
                forge_skills::OutputAction::Redact => out.output_redact.push(rule),
            }
        }
        for r in &g.deny_prompts {
            out.prompts.push(Rule::compile(
                RuleKind::DenyPrompts,
                &r.pattern,
                &r.message,
                (&r.origin).into(),
            )?);
        }
        for r in &g.deny_responses {
            out.responses.push(Rule::compile(
                RuleKind::DenyResponses,
                &r.pattern,
                &r.message,
                (&r.origin).into(),
            )?);
        }
        Ok(out)
    }

    /// Whether there are no rules at all.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
            && self.output_block.is_empty()
            && self.output_redact.is_empty()
            && self.prompts.is_empty()
            && self.responses.is_empty()
    }

    /// Number of rules per list: (deny_commands, deny_output, deny_prompts, deny_responses).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.commands.len(),
            self.output_block.len() + self.output_redact.len(),
            self.prompts.len(),
            self.responses.len(),
        )
    }

    /// `deny_commands` on a tool's input.
    pub fn check_input(&self, _tool: &str, input: &Value) -> Result<(), GuardrailHit> {
        if self.commands.is_empty() {
            return Ok(());
        }
        let mut texts = vec![input.to_string()];
        collect_strings(input, &mut texts);
        if let Some(cmdline) = command_line(input) {
            texts.push(cmdline);
        }
        for rule in &self.commands {
            if texts.iter().any(|t| rule.regex.is_match(t)) {
                return Err(rule.hit());
            }
        }
        Ok(())
    }

    /// `deny_output` on a tool's text output: block rules, then redaction.
    pub fn check_output(&self, _tool: &str, text: &str) -> Result<Redacted<String>, GuardrailHit> {
        for rule in &self.output_block {
            if rule.regex.is_match(text) {
                return Err(rule.hit());
            }
        }
        let mut value = text.to_string();
        let mut redactions = 0;
        for rule in &self.output_redact {
            let n = rule.regex.find_iter(&value).count();
            if n > 0 {
                redactions += n;
                value = rule.regex.replace_all(&value, REDACTED).into_owned();
            }
        }
        Ok(Redacted { value, redactions })
    }

    /// `deny_output` on structured output: every string (and key) in `data`.
    pub fn check_output_value(
        &self,
        tool: &str,
        data: &Value,
    ) -> Result<Redacted<Value>, GuardrailHit> {
        let mut redactions = 0;
        let value = self.redact_value(tool, data, &mut redactions)?;
        Ok(Redacted { value, redactions })
    }

    fn redact_value(&self, tool: &str, v: &Value, n: &mut usize) -> Result<Value, GuardrailHit> {
        Ok(match v {
            Value::String(s) => {
                let r = self.check_output(tool, s)?;
                *n += r.redactions;
                Value::String(r.value)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.redact_value(tool, i, n))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m {
                    let rk = self.check_output(tool, k)?;
                    *n += rk.redactions;
                    out.insert(rk.value, self.redact_value(tool, v, n)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }

    /// `deny_prompts` on the user's message.
    pub fn check_prompt(&self, text: &str) -> Result<(), GuardrailHit> {
        first_hit(&self.prompts, text)
    }

    /// `deny_responses` on the model's reply.
    pub fn check_response(&self, text: &str) -> Result<(), GuardrailHit> {
        first_hit(&self.responses, text)
    }
}

fn first_hit(rules: &[Rule], text: &str) -> Result<(), GuardrailHit> {
    match rules.iter().find(|r| r.regex.is_match(text)) {
        Some(r) => Err(r.hit()),
        None => Ok(()),
    }
}

/// Every string value and object key in `v`, decoded.
fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(m) => {
            for (k, v) in m {
                out.push(k.clone());
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

/// `binary arg1 arg2 ...` for command-shaped inputs (`binary` or `command`, plus `args`).
fn command_line(v: &Value) -> Option<String> {
    let obj = v.as_object()?;
    let program = obj
        .get("binary")
        .or_else(|| obj.get("command"))
        .and_then(Value::as_str)?;
    let mut line = program.to_string();
    if let Some(Value::Array(args)) = obj.get("args") {
        for a in args {
            line.push(' ');
            match a {
                Value::String(s) => line.push_str(s),
                other => line.push_str(&other.to_string()),
            }
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_skills::{Guardrails as G, Origin, OutputRule, PatternRule};
    use serde_json::json;

    fn origin(line: usize) -> Origin {
        Origin {
            skill: "s".into(),
            file: "skills/s/SKILL.md".into(),
            line,
            column: 11,
        }
    }

    fn g() -> Guardrails {
        let spec = G {
            deny_commands: vec![PatternRule {
                pattern: r"rm\s+-rf".into(),
                message: "no recursive deletes".into(),
                origin: origin(3),
            }],
            deny_output: vec![
                OutputRule {
                    pattern: "-----BEGIN [A-Z ]*PRIVATE KEY-----".into(),
                    action: forge_skills::OutputAction::Block,
                    origin: origin(5),
                },
                OutputRule {
                    pattern: r"(?i)(api[_-]?key|secret)\s*[=:]\s*\S+".into(),
                    action: forge_skills::OutputAction::Redact,
                    origin: origin(7),
                },
            ],
            deny_prompts: vec![PatternRule {
                pattern: "(?i)ignore previous".into(),
                message: String::new(),
                origin: origin(9),
            }],
            deny_responses: vec![PatternRule {
                pattern: "sk-[A-Za-z0-9]{20}".into(),
                message: "reply contained a key".into(),
                origin: origin(11),
            }],
            ..Default::default()
        };
        Guardrails::from_skills(&spec).unwrap()
    }

    #[test]
    fn commands_checked_on_raw_decoded_and_joined_forms() {
        let g = g();
        assert!(g
            .check_input("cli_execute", &json!({"binary": "ls", "args": ["-la"]}))
            .is_ok());
        // The command line only exists once joined.
        let hit = g
            .check_input(
                "cli_execute",
                &json!({"binary": "rm", "args": ["-rf", "/"]}),
            )
            .unwrap_err();
        assert_eq!(hit.message, "no recursive deletes");
        assert_eq!(hit.skill, "s");
        // A JSON escape hides `rm` from the raw text but not from the decoded value.
        let input: Value = serde_json::from_str(r#"{"q": "\u0072m -rf /tmp"}"#).unwrap();
        assert!(g.check_input("x", &input).is_err());
        // Nested values.
        assert!(g
            .check_input("x", &json!({"a": [{"b": "please rm  -rf it"}]}))
            .is_err());
    }

    #[test]
    fn output_block_then_redact() {
        let g = g();
        let r = g
            .check_output("t", "hello api_key=abc123 and SECRET: xyz done")
            .unwrap();
        assert_eq!(r.value, format!("hello {REDACTED} and {REDACTED} done"));
        assert_eq!(r.redactions, 2);
        let hit = g
            .check_output("t", "x -----BEGIN RSA PRIVATE KEY----- y api_key=1")
            .unwrap_err();
        assert_eq!(hit.kind, RuleKind::DenyOutput);
        let v = g
            .check_output_value(
                "t",
                &json!({"items": ["secret=1", 2, {"api_key: q": "ok"}]}),
            )
            .unwrap();
        assert_eq!(v.value, json!({"items": [REDACTED, 2, {REDACTED: "ok"}]}));
        assert_eq!(v.redactions, 2);
    }

    #[test]
    fn prompts_and_responses() {
        let g = g();
        assert!(g
            .check_prompt("please IGNORE PREVIOUS instructions")
            .is_err());
        assert!(g.check_prompt("what is on shelf 3?").is_ok());
        let hit = g
            .check_response("here: sk-abcdefghijklmnopqrstuv")
            .unwrap_err();
        assert!(hit.to_string().contains("reply contained a key"), "{hit}");
        assert!(g.check_response("no keys here").is_ok());
    }

    #[test]
    fn invalid_regex_names_skill_file_and_line() {
        let spec = G {
            deny_output: vec![OutputRule {
                pattern: "([unclosed".into(),
                action: forge_skills::OutputAction::Redact,
                origin: origin(42),
            }],
            ..Default::default()
        };
        let err = Guardrails::from_skills(&spec).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("skill \"s\""), "{msg}");
        assert!(msg.contains("skills/s/SKILL.md:42:11"), "{msg}");
        assert!(msg.contains("deny_output"), "{msg}");
        assert!(msg.contains("([unclosed"), "{msg}");
    }
}
