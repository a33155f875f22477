//! The cost of the live view (issue 24, point 2): a page that changes twenty times a second, for
//! 5 s with nobody watching and 5 s with one watcher (a `LiveTab` receiver that reads every
//! frame): frames, frames a second, JPEG bytes a frame, and the on-CPU time of Chromium (every
//! process of its profile) and of this process (forge's side: the proxy, the screencast driver).
//!
//! `cargo bench -p forge-browser --bench live`. Prints a markdown table to stdout.
// Printing is allowed here (a figures run: its results are its output).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use forge_testkit::browser::*;
use forge_testkit::site::{Response, Site};
use forge_testkit::squid::proc_cpu;
use serde_json::json;

const WINDOW: Duration = Duration::from_secs(5);

const ANIMATED: &str = r#"<!doctype html><html><head><title>Moving</title>
<style>#box{position:absolute;width:120px;height:120px;background:#36c}</style></head><body>
<p id=t>0</p><div id=box></div><script>let n = 0; setInterval(() => { n++;
document.getElementById('t').textContent = n; const b = document.getElementById('box');
b.style.left = (n * 7 % 1000) + 'px'; b.style.top = (n * 3 % 500) + 'px'; }, 50);</script>
</body></html>"#;

fn cpu(profile: &str) -> (Duration, Duration) {
    let chromium = processes_mentioning(profile)
        .into_iter()
        .map(|pid| proc_cpu(pid as u32))
        .sum();
    (chromium, proc_cpu(std::process::id()))
}

fn main() {
    let site = Site::start(|_| Response::html(ANIMATED));
    let Some(b) = Shared::start(
        "live bench",
        &[format!("127.0.0.1:{}", site.addr.port())],
        Confine::WhereAvailable,
    ) else {
        return;
    };
    let ctx = b.context("bench");
    b.run_tool(
        &ctx,
        "browser_navigate",
        json!({"url": format!("http://127.0.0.1:{}/", site.addr.port())}),
    )
    .expect("navigate");
    let m = b.manager.clone();
    let profile =
        b.rt.block_on(m.profile_dir())
            .expect("a running browser")
            .display()
            .to_string();
    let tab = b.rt.block_on(m.live_tab("bench")).expect("a tab");

    let (c0, f0) = cpu(&profile);
    let frames0 = tab.frames_received();
    std::thread::sleep(WINDOW);
    let (c1, f1) = cpu(&profile);
    let idle_frames = tab.frames_received() - frames0;

    let (frames, bytes, secs, c2, f2) = b.rt.block_on(async {
        let mut rx = tab.subscribe();
        let start = Instant::now();
        let (c2, f2) = cpu(&profile);
        let (mut frames, mut bytes) = (0u64, 0u64);
        while start.elapsed() < WINDOW {
            if tokio::time::timeout(WINDOW, rx.changed()).await.is_err() {
                break;
            }
            if let Some(f) = rx.borrow_and_update().clone() {
                frames += 1;
                bytes += f.jpeg.len() as u64;
            }
        }
        (frames, bytes, start.elapsed().as_secs_f64(), c2, f2)
    });
    let (c3, f3) = cpu(&profile);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the start: {}", load.trim());
    println!();
    println!("| 5 s of a page changing 20x/s | frames | frames/s | KB/frame | Chromium CPU ms | forge CPU ms |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| nobody watching | {idle_frames} | {:.1} | - | {:.0} | {:.0} |",
        idle_frames as f64 / WINDOW.as_secs_f64(),
        ms(c1 - c0),
        ms(f1 - f0)
    );
    println!(
        "| one watcher | {frames} | {:.1} | {:.1} | {:.0} | {:.0} |",
        frames as f64 / secs,
        if frames > 0 {
            bytes as f64 / frames as f64 / 1024.0
        } else {
            0.0
        },
        ms(c3 - c2),
        ms(f3 - f2)
    );
}
