//! Adapter from a loaded agent (`forge_skills::Agent`) and its audit (`forge_analyzer`) to the
//! build's own [`BuildSpec`]. Kept narrow so the rest of the crate depends only on plain data.

use std::path::Path;

use crate::error::BuildError;
use crate::spec::BuildSpec;

/// Inputs for [`spec_from_agent`].
pub struct AgentInputs<'a> {
    /// Path of forge.yaml.
    pub config_path: &'a Path,
    /// `--policy FILE` for the audit.
    pub policy_path: Option<&'a Path>,
}

/// Loads the agent at `inputs.config_path`, audits its skills and returns the build spec.
pub fn spec_from_agent(inputs: &AgentInputs<'_>) -> Result<BuildSpec, BuildError> {
    Err(BuildError::Load(format!(
        "{}: loading agents is not wired up yet (waiting for forge-skills)",
        inputs.config_path.display()
    )))
}
