//! Adapter from a loaded agent (`forge_skills::Agent`) and its audit (`forge_analyzer`) to the
//! build's own [`BuildSpec`]. Kept narrow so the rest of the crate depends only on plain data.

use std::path::{Path, PathBuf};

use forge_skills::{Agent, SkillSource};

use crate::spec::{
    push_unique, AptPackage, AuditOutcome, BrowserSpec, BuildSpec, EgressSpec, EnvSpec, ModelSpec,
    SkillSpec, SkillTool,
};

fn rel_display(path: &Path, dir: &Path) -> String {
    path.strip_prefix(dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// Converts a loaded agent plus its audit into the build's input.
pub fn spec_from_agent(agent: &Agent, audit: AuditOutcome) -> BuildSpec {
    let cfg = &agent.config;
    let agg = &agent.aggregate;
    let dir = agent.dir.clone();
    // Which tools the agent gets: the same plan forge-runtime's assembly builds from.
    let tool_plan = agent.tool_plan();
    let engines = agent.browser_engines();
    let script_of = |skill: &str, tool: &str| {
        tool_plan
            .tools
            .iter()
            .filter_map(|t| t.script.as_ref().filter(|_| t.name == tool))
            .find(|b| b.skill == skill)
            .map(|b| rel_display(&b.script, &dir))
    };

    let skills: Vec<SkillSpec> = agent
        .skills
        .iter()
        .map(|s| SkillSpec {
            name: s.name.clone(),
            source: s.source.to_string(),
            file: match s.source {
                SkillSource::Embedded => s.path.display().to_string(),
                SkillSource::Local => rel_display(&s.path, &dir),
            },
            capabilities: s
                .capabilities()
                .iter()
                .map(|c| c.as_str().to_string())
                .collect(),
            egress_domains: s
                .forge
                .as_ref()
                .map(|f| f.egress_domains.clone())
                .unwrap_or_default(),
            tools: s
                .tools
                .iter()
                .map(|t| SkillTool {
                    name: t.name.clone(),
                    script: script_of(&s.name, &t.name),
                })
                .collect(),
        })
        .collect();

    let mut apt_packages = Vec::new();
    for bin in &agg.bins {
        let Some(apt) = bin.apt.as_deref() else {
            continue;
        };
        let skill = agent
            .skills
            .iter()
            .find(|s| {
                s.forge.as_ref().is_some_and(|f| {
                    f.requires
                        .bins
                        .iter()
                        .any(|b| b.name == bin.name && b.apt.is_some())
                })
            })
            .map(|s| s.name.clone())
            .unwrap_or_default();
        for name in apt.split([',', ' ', '\t']).filter(|p| !p.is_empty()) {
            apt_packages.push(AptPackage {
                name: name.to_string(),
                skill: skill.clone(),
                bin: bin.name.clone(),
            });
        }
    }

    let mut optional = Vec::new();
    for v in &agg.env.optional {
        push_unique(&mut optional, v.clone());
    }

    let mut extra_agent_files: Vec<PathBuf> = Vec::new();
    let root_skill = cfg
        .skills
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from("SKILL.md"));
    if dir.join(&root_skill).is_file() {
        extra_agent_files.push(root_skill);
    }

    BuildSpec {
        agent_id: cfg.agent_id.clone(),
        version: cfg.version.clone(),
        framework: cfg.framework.clone(),
        config_path: cfg.path.clone(),
        agent_dir: dir,
        extra_agent_files,
        model: cfg
            .model
            .as_ref()
            .map(|m| ModelSpec {
                provider: Some(m.provider.clone()).filter(|s| !s.is_empty()),
                name: Some(m.name.clone()).filter(|s| !s.is_empty()),
                base_url: m.base_url.clone(),
                fallbacks: m
                    .fallbacks
                    .iter()
                    .map(|f| ModelSpec {
                        provider: Some(f.provider.clone()).filter(|s| !s.is_empty()),
                        name: Some(f.name.clone()).filter(|s| !s.is_empty()),
                        base_url: f.base_url.clone(),
                        fallbacks: Vec::new(),
                    })
                    .collect(),
            })
            .unwrap_or_default(),
        skills,
        capabilities: agg
            .capabilities
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        // From the files only (forge.yaml and the skills), never FORGE_BROWSER_ENGINE: the
        // image is a function of the agent directory (docs/build.md, "Browser engines").
        browser: agg.browser_view().map(|b| BrowserSpec {
            skills: b.skills,
            allow_sensitive_fill: b.allow_sensitive_fill,
            engines: engines.used(),
            skill_engines: engines.skills.clone(),
        }),
        apt_packages,
        env: EnvSpec {
            required: agg.env.required.clone(),
            optional,
            one_of: agg.env.one_of.iter().map(|g| g.vars.clone()).collect(),
        },
        egress: EgressSpec {
            mode: cfg.egress.mode,
            allowed_domains: cfg.egress.allowed_domains.clone(),
            skill_domains: agg.egress_domains.clone(),
            allow_private_ips: cfg.egress.allow_private_ips,
            allowed_private_cidrs: cfg.egress.allowed_private_cidrs.clone(),
        },
        configured_tools: cfg.tools.iter().map(|t| t.name.clone()).collect(),
        cli_binaries: agg.cli_view().allowed_binaries,
        denied_tools: agent.denied_tools(),
        tool_plan,
        audit,
        mcp_servers: cfg
            .mcp
            .servers
            .iter()
            .map(|m| crate::spec::McpServerSpec {
                name: m.name.clone(),
                transport: m.transport.as_str().to_string(),
                url: m.url.clone(),
                required: m.required,
            })
            .collect(),
        deploy: crate::spec::DeploySpec {
            replicas_min: cfg.deploy.replicas.min,
            replicas_max: cfg.deploy.replicas.max,
            postgres_url: cfg.state.url.clone().filter(|_| cfg.state.is_postgres()),
            task_seconds_cap: cfg.tasks.max_seconds_cap,
        },
        confinement: cfg.security.confinement,
        secrets: cfg.secrets.clone(),
        profiles: cfg.browser.profiles.clone(),
    }
}

/// Runs the skills audit (`forge skills audit`) on the agent's active skills with the policy at
/// `policy_path`, else forge.yaml `security.policy_path` (relative to the agent dir), else the
/// default policy. Error-level and critical violations become [`AuditOutcome::errors`].
pub fn audit_agent(
    agent: &Agent,
    policy_path: Option<&Path>,
) -> Result<AuditOutcome, crate::BuildError> {
    let path = policy_path.map(Path::to_path_buf).or_else(|| {
        agent
            .config
            .security
            .policy_path
            .as_ref()
            .map(|p| agent.dir.join(p))
    });
    let policy = match path {
        Some(p) => forge_analyzer::Policy::load(&p).map_err(|e| {
            crate::BuildError::Load(format!("{:?}", forge_skills::miette::Report::new(e)))
        })?,
        None => forge_analyzer::Policy::default(),
    };
    let report = forge_analyzer::audit(&agent.skills, &policy);
    let errors = report
        .assessments
        .iter()
        .flat_map(|a| {
            a.violations
                .iter()
                .filter(|v| v.severity.fails())
                .map(move |v| format!("{}: {}: {}", a.skill_name, v.rule, v.message))
        })
        .collect();
    Ok(AuditOutcome { report, errors })
}
