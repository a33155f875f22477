//! How long parsing skills and loading an agent take (run: `cargo bench -p forge-skills --bench load`).
//!
//! A plain timing loop (no bench framework dependency): each case runs a fixed number of
//! iterations after a warm-up and prints the mean per iteration. Figures go to docs/benchmarks.md.

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use forge_skills::{parse_skill, Agent, Aggregate, SkillSource};

fn time<F: FnMut()>(name: &str, iters: u32, mut f: F) {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    let per = start.elapsed() / iters;
    println!("{name:<48} {per:>12.2?} per iteration ({iters} iterations)");
}

fn main() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let k8s =
        std::fs::read_to_string(repo.join("fixtures/skills/good/k8s-incident-triage/SKILL.md"))
            .expect("fixture exists");
    let web = forge_skills::EMBEDDED[0].1;
    time("parse SKILL.md (k8s-incident-triage, 2.0 KB)", 2000, || {
        black_box(parse_skill(&k8s, Path::new("SKILL.md"), "k", SkillSource::Local).ok());
    });
    time("parse embedded web-browse", 2000, || {
        black_box(parse_skill(web, Path::new("SKILL.md"), "w", SkillSource::Embedded).ok());
    });
    let skills = forge_skills::discover(&repo.join("fixtures/skills/good")).skills;
    time("aggregate 5 skills + browser/cli views", 20000, || {
        let a = Aggregate::from_skills(black_box(&skills));
        black_box((a.browser_view(), a.cli_view()));
    });
    let cfg = repo.join("fixtures/agents/browse/forge.yaml");
    time(
        "Agent::load(fixtures/agents/browse) from disk",
        1000,
        || {
            black_box(Agent::load(&cfg).ok());
        },
    );
    time("discover fixtures/skills/good (5 skills)", 500, || {
        black_box(forge_skills::discover(&repo.join("fixtures/skills/good")));
    });
}
