//! No input makes the parsers panic: every fixture, truncated at every char boundary and with
//! characters replaced by YAML punctuation, parses to a value or an error.

use std::path::{Path, PathBuf};

use forge_skills::{parse_skill, ForgeConfig, SkillSource};

fn fixtures() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [
        "fixtures/skills/good",
        "fixtures/skills/bad",
        "fixtures/skills/audit",
    ] {
        let d = forge_skills::discover(&root.join(dir));
        out.extend(
            d.skills
                .iter()
                .map(|s| std::fs::read_to_string(&s.path).unwrap()),
        );
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path().join("SKILL.md");
            if let Ok(t) = std::fs::read_to_string(p) {
                out.push(t);
            }
        }
    }
    out.push(std::fs::read_to_string(root.join("fixtures/agents/browse/forge.yaml")).unwrap());
    out
}

#[test]
fn truncations_and_mutations_never_panic() {
    let mut inputs = 0usize;
    for text in fixtures() {
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        // Bounded: at most ~60 cut points per file.
        let step = (bounds.len() / 60).max(1);
        for (n, &cut) in bounds.iter().enumerate().step_by(step) {
            let t = &text[..cut];
            let _ = parse_skill(t, Path::new("f/SKILL.md"), "f", SkillSource::Local);
            let _ = ForgeConfig::parse(t, Path::new("forge.yaml"));
            let punct = [":", "-", "[", "{", "'", "\"", "\t", "🌐", "*", "&a", "!!"][n % 11];
            let mutated = format!("{}{}{}", &text[..cut], punct, &text[cut..]);
            let _ = parse_skill(&mutated, Path::new("f/SKILL.md"), "f", SkillSource::Local);
            let _ = ForgeConfig::parse(&mutated, Path::new("forge.yaml"));
            inputs += 4;
        }
    }
    assert!(inputs > 300, "exercised {inputs} inputs");
}
