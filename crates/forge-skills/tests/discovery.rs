//! Discovery rules: skipped names, flat skills, symlinks leaving the skills dir, root skill file,
//! embedded activation.

use std::fs;

use forge_skills::{discover, Agent, Error, SkillSource};

const SKILL: &str = "---\nname: NAME\ndescription: d\n---\nbody\n";

fn write_skill(dir: &std::path::Path, name: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("SKILL.md"), SKILL.replace("NAME", name)).unwrap();
}

#[test]
fn skips_dot_and_underscore_and_reads_flat_files() {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    write_skill(&skills.join("one"), "one");
    write_skill(&skills.join(".hidden"), "hidden");
    write_skill(&skills.join("_template"), "template");
    fs::create_dir_all(skills.join("scripts")).unwrap();
    fs::write(skills.join("flat.md"), "## Tool: flat_tool\nDoes things.\n").unwrap();
    fs::write(skills.join("scripts/flat_tool.sh"), "#!/bin/sh\n").unwrap();
    fs::write(skills.join("notes.txt"), "not a skill").unwrap();
    let d = discover(&skills);
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let names: Vec<_> = d.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["flat", "one"]);
    assert_eq!(d.skills[0].scripts.len(), 1);
    // A flat skill's script directory is the skills dir (skills/scripts/<tool>.sh).
    assert_eq!(d.skills[0].dir.as_deref(), Some(skills.as_path()));
    assert_eq!(
        d.skills[1].dir.as_deref(),
        Some(skills.join("one").as_path())
    );
}

#[cfg(unix)]
#[test]
fn symlink_leaving_skills_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    write_skill(&skills.join("inside"), "inside");
    write_skill(&tmp.path().join("outside"), "outside");
    std::os::unix::fs::symlink(tmp.path().join("outside"), skills.join("linked")).unwrap();
    std::os::unix::fs::symlink(skills.join("inside"), skills.join("alias")).unwrap();
    let d = discover(&skills);
    assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
    assert!(matches!(&d.errors[0], Error::SymlinkEscape { link, .. } if link.ends_with("linked")));
    // A link staying inside is followed (and here duplicates "inside" by name).
    let names: Vec<_> = d.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["inside", "inside"]);
}

#[cfg(unix)]
#[test]
fn skill_containing_a_symlink_out_of_the_skills_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    write_skill(&skills.join("sneaky"), "sneaky");
    write_skill(&skills.join("fine"), "fine");
    fs::create_dir_all(skills.join("sneaky/scripts")).unwrap();
    fs::write(tmp.path().join("outside.sh"), "#!/bin/sh\n").unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("outside.sh"),
        skills.join("sneaky/scripts/run.sh"),
    )
    .unwrap();
    let d = discover(&skills);
    let names: Vec<_> = d.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fine"]);
    assert_eq!(d.errors.len(), 1);
    assert!(
        matches!(&d.errors[0], Error::SymlinkEscape { link, .. } if link.ends_with("scripts/run.sh")),
        "{:?}",
        d.errors
    );
}

#[test]
fn agent_root_skill_embedded_reference_and_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(
        dir.join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\nskills:\n  path: AGENT.md\n  embedded: [web-browse]\n",
    )
    .unwrap();
    fs::write(dir.join("AGENT.md"), "## Tool: root_tool\nRoot.\n").unwrap();
    write_skill(&dir.join("skills/one"), "one");
    let agent = Agent::load(dir.join("forge.yaml")).unwrap();
    let names: Vec<_> = agent
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(
        names,
        [
            ("a", SkillSource::Local),
            ("one", SkillSource::Local),
            ("web-browse", SkillSource::Embedded)
        ]
    );
    assert!(agent.aggregate.browser_view().is_some());

    // Unknown embedded name and a duplicate skill name are errors.
    fs::write(
        dir.join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\nskills:\n  embedded: [web-brows]\n",
    )
    .unwrap();
    write_skill(&dir.join("skills/two"), "one");
    let (_, errors) = Agent::load_all(dir.join("forge.yaml")).unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(matches!(&errors[0], Error::DuplicateSkill { name, .. } if name == "one"));
    assert!(matches!(&errors[1], Error::UnknownEmbedded { name, .. } if name == "web-brows"));

    // An explicit skills.path that does not exist is an error.
    fs::write(
        dir.join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\nskills:\n  path: MISSING.md\n",
    )
    .unwrap();
    fs::remove_dir_all(dir.join("skills/two")).unwrap();
    assert!(matches!(
        Agent::load(dir.join("forge.yaml")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn oversized_and_non_utf8_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("forge.yaml");
    fs::write(&big, "a".repeat(2 * 1024 * 1024)).unwrap();
    let err = forge_skills::ForgeConfig::load(&big).unwrap_err();
    assert!(
        err.to_string().contains("larger than 1048576 bytes"),
        "{err}"
    );
    let bin = tmp.path().join("SKILL.md");
    fs::write(&bin, b"---\nname: \xff\n---\n").unwrap();
    let err = forge_skills::load_skill_file(&bin, "x").unwrap_err();
    assert!(
        err.to_string()
            .contains("not UTF-8 text (invalid byte at offset 10)"),
        "{err}"
    );
}
