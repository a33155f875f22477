//! What tool assembly and the tool call path cost (run: `cargo bench -p forge-runtime --bench tools`).
//!
//! A plain timing loop (no bench framework): each case runs a warm-up, then a fixed number of
//! iterations, and prints the median (and mean) per iteration. Figures go to docs/benchmarks.md
//! ("Tools"). Agents are the `fixtures/agents/tools-*` fixtures, copied to a temp dir.

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use forge_runtime::{assemble, AssembleOptions};
use forge_skills::Agent;
use forge_tools::Tool;
use serde_json::json;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read fixture").flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy fixture file");
        }
    }
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<58} median {median:>10.2?}  mean {mean:>10.2?}  ({} runs)",
        samples.len()
    );
}

async fn time_async<F, Fut>(name: &str, iters: usize, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..(iters / 10).max(1) {
        f().await;
    }
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    report(name, samples);
}

#[tokio::main]
async fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir().expect("temp dir");
    let load = |name: &str| {
        let d = tmp.path().join(name);
        copy_dir(&repo.join("fixtures/agents").join(name), &d);
        Agent::load(d.join("forge.yaml")).expect("fixture agent loads")
    };
    let plain = load("tools-plain");
    let cli = load("tools-cli");
    let browser = load("tools-browser");

    time_async(
        "assemble tools-plain (builtins, guardrails, no proxy)",
        200,
        || async {
            let t = assemble(&plain, AssembleOptions::default())
                .await
                .expect("assembles");
            t.shutdown().await;
        },
    )
    .await;
    time_async(
        "assemble tools-cli (cli_execute + script, proxy started)",
        100,
        || async {
            let t = assemble(&cli, AssembleOptions::default())
                .await
                .expect("assembles");
            t.shutdown().await;
        },
    )
    .await;
    if forge_browser::find_browser_binary().is_ok() {
        time_async(
            "assemble tools-browser (binary resolved, proxy, no launch)",
            100,
            || async {
                let t = assemble(&browser, AssembleOptions::default())
                    .await
                    .expect("assembles");
                t.shutdown().await;
            },
        )
        .await;
    } else {
        println!("assemble tools-browser: skipped, no Chromium installed");
    }

    // The call path: direct tool call vs through the runner (lookup, deny_commands, time limit,
    // deny_output with the tools-plain skill's 1 + 2 rules).
    let tools = assemble(&plain, AssembleOptions::default())
        .await
        .expect("assembles");
    let ctx = tools.context("bench");
    let input = json!({"expression": "(2 + 3) * sqrt(16) / 4 - max(1, 2, 3)"});
    let direct = forge_tools::builtins::math::MathCalculate;
    time_async("math_calculate called directly", 20000, || async {
        black_box(direct.execute(&ctx, input.clone()).await.ok());
    })
    .await;
    time_async(
        "math_calculate through ToolRunner (guardrails)",
        20000,
        || async {
            black_box(
                tools
                    .execute("math_calculate", input.clone(), &ctx)
                    .await
                    .ok(),
            );
        },
    )
    .await;
    let page: String = (0..1000)
        .map(|i| format!("line {i}: some page text, token=abc{i} and more words\n"))
        .collect();
    let g = tools.guardrails().clone();
    time_async(
        &format!(
            "deny_output on {} KB of text with 1000 redactions",
            page.len() / 1024
        ),
        200,
        || async {
            black_box(g.check_output("t", &page).ok());
        },
    )
    .await;
    tools.shutdown().await;

    // Process spawn cost of cli_execute (no shell, cleared env, process group).
    let tools = assemble(&cli, AssembleOptions::default())
        .await
        .expect("assembles");
    let ctx = tools.context("bench");
    time_async("cli_execute echo round trip", 200, || async {
        black_box(
            tools
                .execute(
                    "cli_execute",
                    json!({"binary": "echo", "args": ["hi"]}),
                    &ctx,
                )
                .await
                .ok(),
        );
    })
    .await;
    tools.shutdown().await;
}
