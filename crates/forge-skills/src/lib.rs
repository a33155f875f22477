//! forge-skills: SKILL.md and forge.yaml parsing, requirement aggregation, derived configs.
