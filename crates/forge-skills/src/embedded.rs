//! Skills compiled into the forge binary from the repository's `skills/` folder.
//!
//! Embedded skills are listable (`forge skills list --embedded`) but become active for an agent
//! only when its forge.yaml names them under `skills.embedded`, or one of its skills references
//! them with a `uses: [{type: skill, ref: <name>}]` entry. A local skill with the same name wins.

use std::path::PathBuf;

use crate::skill::{parse_skill, Skill, SkillSource};
use crate::Error;

/// (name, SKILL.md content) of every embedded skill.
pub const EMBEDDED: &[(&str, &str)] = &[(
    "web-browse",
    include_str!("../../../skills/web-browse/SKILL.md"),
)];

/// Names of the embedded skills.
pub fn embedded_names() -> Vec<String> {
    EMBEDDED.iter().map(|(n, _)| n.to_string()).collect()
}

/// Parse every embedded skill. They are checked by this crate's tests, so an error here means a
/// broken build; it is still returned rather than panicking.
pub fn embedded_skills() -> Result<Vec<Skill>, Error> {
    EMBEDDED
        .iter()
        .filter_map(|(name, _)| embedded_skill(name).transpose())
        .collect()
}

/// One embedded skill by name (`Ok(None)` if there is none with that name).
pub fn embedded_skill(name: &str) -> Result<Option<Skill>, Error> {
    let Some((n, content)) = EMBEDDED.iter().find(|(n, _)| *n == name) else {
        return Ok(None);
    };
    let path = PathBuf::from(format!("embedded:{n}/SKILL.md"));
    parse_skill(content, &path, n, SkillSource::Embedded).map(Some)
}
