//! An agent on disk: forge.yaml, its directory, its active skills and their aggregate.
//!
//! Active skills, in order: the root skill file (`skills.path`, default `SKILL.md`, when it
//! exists), `skills/*/SKILL.md` and `skills/*.md`, then embedded skills the agent references
//! (`skills.embedded` in forge.yaml or a skill's `uses: [{type: skill, ref: <name>}]`). A local
//! skill with the same name as an embedded one replaces it.

use std::path::{Path, PathBuf};

use crate::aggregate::Aggregate;
use crate::browser::{BrowserEngine, BrowserEngines, SkillEngine};
use crate::config::ForgeConfig;
use crate::discovery::{discover, load_skill_file};
use crate::embedded::{embedded_names, embedded_skill};
use crate::skill::Skill;
use crate::Error;

/// A loaded agent.
#[derive(Debug, Clone)]
pub struct Agent {
    pub config: ForgeConfig,
    /// The directory holding forge.yaml.
    pub dir: PathBuf,
    /// Active skills.
    pub skills: Vec<Skill>,
    pub aggregate: Aggregate,
}

impl Agent {
    /// Every tool this agent must not have: forge.yaml `denied_tools` first, then the skills'
    /// (de-duplicated, first occurrence kept).
    pub fn denied_tools(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self
            .config
            .denied_tools
            .iter()
            .chain(&self.aggregate.denied_tools)
        {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        out
    }

    /// The engine of each browser skill: its own `requires.browser_engine`, else forge.yaml
    /// `browser.engine`, else chromium (see [`BrowserEngines`] for the rule).
    pub fn browser_engines(&self) -> BrowserEngines {
        self.browser_engines_with(None)
    }

    /// [`Self::browser_engines`] with `default_override` (the runtime passes
    /// `FORGE_BROWSER_ENGINE`'s engine) replacing forge.yaml's `browser.engine` as the default;
    /// a skill's own choice still stands.
    pub fn browser_engines_with(&self, default_override: Option<BrowserEngine>) -> BrowserEngines {
        let default = default_override
            .or(self.config.browser.engine)
            .unwrap_or_default();
        let skills = self
            .skills
            .iter()
            .filter(|s| s.requires_browser())
            .map(|s| SkillEngine {
                skill: s.name.clone(),
                engine: s.browser_engine().unwrap_or(default),
                explicit: s.browser_engine().is_some(),
            })
            .collect();
        BrowserEngines { default, skills }
    }

    /// Load the agent whose forge.yaml is `config_path`. Fails on the first bad file.
    pub fn load(config_path: impl AsRef<Path>) -> Result<Agent, Error> {
        let (agent, mut errors) = Self::load_all(config_path)?;
        match errors.is_empty() {
            true => Ok(agent),
            false => Err(errors.remove(0)),
        }
    }

    /// Load the agent, collecting every skill error instead of stopping at the first
    /// (for `forge skills validate`). forge.yaml itself must parse.
    pub fn load_all(config_path: impl AsRef<Path>) -> Result<(Agent, Vec<Error>), Error> {
        let config = ForgeConfig::load(config_path.as_ref())?;
        let dir = config.dir();
        let mut skills: Vec<Skill> = Vec::new();
        let mut errors = Vec::new();

        let (root_rel, explicit) = match &config.skills.path {
            Some(p) => (p.clone(), true),
            None => (PathBuf::from("SKILL.md"), false),
        };
        let root_path = dir.join(&root_rel);
        if root_path.is_file() {
            match load_skill_file(&root_path, &config.agent_id) {
                Ok(s) => skills.push(s),
                Err(e) => errors.push(e),
            }
        } else if explicit {
            let why = if root_path.is_dir() {
                "forge.yaml `skills.path` names a directory; it must name the agent's root skill file (e.g. SKILL.md)"
            } else {
                "forge.yaml `skills.path` names a file that does not exist"
            };
            errors.push(Error::Io {
                path: root_path.clone(),
                error: std::io::Error::new(std::io::ErrorKind::NotFound, why),
            });
        }
        let root_real = root_path.canonicalize().ok();

        let found = discover(&dir.join("skills"));
        errors.extend(found.errors);
        for s in found.skills {
            // The root skill file may itself live in skills/; it is loaded once.
            if root_real.is_some() && s.path.canonicalize().ok() == root_real {
                continue;
            }
            if let Some(first) = skills.iter().find(|x| x.name == s.name) {
                errors.push(Error::DuplicateSkill {
                    name: s.name.clone(),
                    first: first.path.clone(),
                    second: s.path.clone(),
                });
                continue;
            }
            skills.push(s);
        }

        // Embedded skills referenced by forge.yaml or by a skill's `uses`.
        let mut wanted: Vec<(String, PathBuf)> = config
            .skills
            .embedded
            .iter()
            .map(|n| (n.clone(), config.path.clone()))
            .collect();
        for s in &skills {
            if let Some(f) = &s.forge {
                for u in f.uses.iter().filter(|u| u.kind == "skill") {
                    wanted.push((u.reference.clone(), s.path.clone()));
                }
            }
        }
        for (name, referenced_by) in wanted {
            if skills.iter().any(|s| s.name == name) {
                continue;
            }
            match embedded_skill(&name) {
                Ok(Some(s)) => skills.push(s),
                Ok(None) => {
                    // `uses` may name a skill that is local under another directory name;
                    // only forge.yaml references must resolve to an embedded skill.
                    if referenced_by == config.path {
                        errors.push(Error::UnknownEmbedded {
                            name,
                            referenced_by,
                            known: embedded_names(),
                        })
                    }
                }
                Err(e) => errors.push(e),
            }
        }

        let aggregate = Aggregate::from_skills(&skills);
        Ok((
            Agent {
                config,
                dir,
                skills,
                aggregate,
            },
            errors,
        ))
    }
}
