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

#[test]
fn deep_nesting_and_alias_bombs_are_errors_not_crashes() {
    let deep = format!("---\nname: x\ntags: {}\n---\n", "[".repeat(50_000));
    assert!(parse_skill(&deep, Path::new("f/SKILL.md"), "f", SkillSource::Local).is_err());
    let deep_map = format!(
        "agent_id: a\nversion: 1\nmodel: {}\n",
        "{a: ".repeat(20_000)
    );
    assert!(ForgeConfig::parse(&deep_map, Path::new("forge.yaml")).is_err());
    // Billion laughs: serde_norway refuses the expansion; the marked tree never expands aliases.
    let mut bomb = String::from("agent_id: a\nversion: '1'\nframework: x\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            [prev.as_str(); 9].join(", ")
        ));
    }
    let _ = ForgeConfig::parse(&bomb, Path::new("forge.yaml"));
}
