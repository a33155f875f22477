//! Requirement aggregation across an agent's active skills, and the configuration derived from it
//! that the runner reads: the `cli_execute` view and the browser view.

use serde::Serialize;

use crate::skill::{BinRequirement, Capability, Guardrails, Skill};

/// Shells never allowed as `cli_execute` binaries, whatever a skill requires.
pub const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh", "csh", "tcsh", "fish"];

/// The union of what the active skills require.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Aggregate {
    /// Names of the aggregated skills, in order.
    pub skills: Vec<String>,
    /// One entry per binary name; the entry with the most install information wins.
    pub bins: Vec<BinRequirement>,
    pub env: EnvAggregate,
    /// Capabilities, de-duplicated, first-occurrence order.
    pub capabilities: Vec<Capability>,
    /// Raw egress entries (exact, `*.suffix`, `$VAR`), de-duplicated, first-occurrence order.
    /// Use [`Aggregate::egress_domains_with`] to expand `$VAR` entries at run time.
    pub egress_domains: Vec<String>,
    /// Tools to remove from the registry, de-duplicated, first-occurrence order.
    pub denied_tools: Vec<String>,
    /// Guardrails of all skills, de-duplicated by pattern; each rule keeps its origin.
    pub guardrails: Guardrails,
    /// The largest `timeout_hint` (seconds).
    pub timeout_hint: Option<u64>,
    /// `workflow_phase` values, de-duplicated.
    pub workflow_phases: Vec<String>,
    /// Skills that declare `requires.capabilities: [browser]`.
    pub browser_skills: Vec<String>,
    /// True only when a skill that itself declares `browser` opts into sensitive fill.
    pub browser_allow_sensitive_fill: bool,
}

/// Aggregated `requires.env`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EnvAggregate {
    /// Union of required vars (optional vars some skill requires are promoted here).
    pub required: Vec<String>,
    /// `one_of` groups, kept per skill (not merged across skills).
    pub one_of: Vec<OneOfGroup>,
    /// Optional vars no skill requires.
    pub optional: Vec<String>,
}

/// One skill's `one_of` group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OneOfGroup {
    pub skill: String,
    pub vars: Vec<String>,
}

/// What the browser needs: present only when some active skill declares `browser`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrowserView {
    /// Skills that asked for the browser.
    pub skills: Vec<String>,
    /// Whether `browser_fill` may type into sensitive fields (password, card number).
    pub allow_sensitive_fill: bool,
}

/// The derived `cli_execute` configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CliView {
    /// Required binaries minus shells.
    pub allowed_binaries: Vec<String>,
    /// Env vars to pass through to child processes (required, one_of, optional).
    pub env_passthrough: Vec<String>,
    /// Largest timeout hint (seconds).
    pub timeout_hint: Option<u64>,
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

impl Aggregate {
    /// Aggregate the requirements of `skills` (the agent's active skills).
    pub fn from_skills(skills: &[Skill]) -> Aggregate {
        let mut a = Aggregate::default();
        let mut optional: Vec<String> = Vec::new();
        for s in skills {
            a.skills.push(s.name.clone());
            let Some(f) = &s.forge else { continue };
            for b in &f.requires.bins {
                match a.bins.iter_mut().find(|x| x.name == b.name) {
                    Some(existing) => {
                        if b.richness() > existing.richness() {
                            *existing = b.clone();
                        }
                    }
                    None => a.bins.push(b.clone()),
                }
            }
            for v in &f.requires.env.required {
                push_unique(&mut a.env.required, v);
            }
            for v in &f.requires.env.optional {
                push_unique(&mut optional, v);
            }
            if !f.requires.env.one_of.is_empty() {
                a.env.one_of.push(OneOfGroup {
                    skill: s.name.clone(),
                    vars: f.requires.env.one_of.clone(),
                });
            }
            for c in &f.requires.capabilities {
                if !a.capabilities.contains(c) {
                    a.capabilities.push(*c);
                }
            }
            if s.requires_browser() {
                push_unique(&mut a.browser_skills, &s.name);
                // No cross-skill escalation: only a browser skill's own opt-in counts.
                if f.guardrails.browser.allow_sensitive_fill {
                    a.browser_allow_sensitive_fill = true;
                }
            }
            for d in &f.egress_domains {
                push_unique(&mut a.egress_domains, d);
            }
            for t in &f.denied_tools {
                push_unique(&mut a.denied_tools, t);
            }
            if let Some(p) = &f.workflow_phase {
                push_unique(&mut a.workflow_phases, p);
            }
            if let Some(t) = f.timeout_hint {
                a.timeout_hint = Some(a.timeout_hint.map_or(t, |cur| cur.max(t)));
            }
            let g = &mut a.guardrails;
            for r in &f.guardrails.deny_commands {
                if !g.deny_commands.iter().any(|x| x.pattern == r.pattern) {
                    g.deny_commands.push(r.clone());
                }
            }
            for r in &f.guardrails.deny_output {
                if !g.deny_output.iter().any(|x| x.pattern == r.pattern) {
                    g.deny_output.push(r.clone());
                }
            }
            for r in &f.guardrails.deny_prompts {
                if !g.deny_prompts.iter().any(|x| x.pattern == r.pattern) {
                    g.deny_prompts.push(r.clone());
                }
            }
            for r in &f.guardrails.deny_responses {
                if !g.deny_responses.iter().any(|x| x.pattern == r.pattern) {
                    g.deny_responses.push(r.clone());
                }
            }
        }
        a.guardrails.browser.allow_sensitive_fill = a.browser_allow_sensitive_fill;
        a.env.optional = optional
            .into_iter()
            .filter(|v| !a.env.required.contains(v))
            .collect();
        a
    }

    /// `None` unless some skill declares the `browser` capability.
    pub fn browser_view(&self) -> Option<BrowserView> {
        if self.browser_skills.is_empty() {
            return None;
        }
        Some(BrowserView {
            skills: self.browser_skills.clone(),
            allow_sensitive_fill: self.browser_allow_sensitive_fill,
        })
    }

    /// The derived `cli_execute` configuration.
    pub fn cli_view(&self) -> CliView {
        let mut env = Vec::new();
        for v in self
            .env
            .required
            .iter()
            .chain(self.env.one_of.iter().flat_map(|g| g.vars.iter()))
            .chain(self.env.optional.iter())
        {
            push_unique(&mut env, v);
        }
        CliView {
            allowed_binaries: self
                .bins
                .iter()
                .map(|b| b.name.clone())
                .filter(|n| !SHELLS.contains(&n.as_str()))
                .collect(),
            env_passthrough: env,
            timeout_hint: self.timeout_hint,
        }
    }

    /// Whether the aggregate requires `cap`.
    pub fn has_capability(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }

    /// Env var names referenced by `$VAR`/`${VAR}` egress entries.
    pub fn egress_env_vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.egress_domains {
            if let Some(v) = var_name(d) {
                push_unique(&mut out, v);
            }
        }
        out
    }

    /// Egress domains with `$VAR`/`${VAR}` entries expanded through `lookup` (typically
    /// `|k| std::env::var(k).ok()`). A variable's value is comma-split, trimmed, empty entries
    /// dropped; an unset variable contributes nothing (deny by default). De-duplicated,
    /// first-occurrence order.
    pub fn egress_domains_with(&self, lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
        expand_domains(&self.egress_domains, lookup)
    }
}

/// `Some(NAME)` for `$NAME` / `${NAME}`.
fn var_name(entry: &str) -> Option<&str> {
    let rest = entry.strip_prefix('$')?;
    let name = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(rest);
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(name)
}

/// Expand `$VAR` entries of `domains` (see [`Aggregate::egress_domains_with`]).
pub fn expand_domains(domains: &[String], lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    for d in domains {
        match var_name(d) {
            Some(v) => {
                if let Some(val) = lookup(v) {
                    for part in val.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                        push_unique(&mut out, part);
                    }
                }
            }
            None => push_unique(&mut out, d),
        }
    }
    out
}
