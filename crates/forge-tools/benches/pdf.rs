//! How long `forge_tools::pdf::read_pdf` takes: on PDFs printed by real headless Chromium (a
//! 2-page and a 50-page report of headings and paragraphs), and to refuse a deflate bomb at the
//! default 256 MiB decoded limit (the worst a small hostile file costs before it is refused).
//!
//! Run: `cargo bench -p forge-tools --bench pdf` (release profile). Prints a markdown table for
//! docs/benchmarks.md. Needs Chromium (FORGE_BROWSER_BIN, or `chromium` on PATH) for the first two
//! rows; without it they are left out with a note.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forge_tools::pdf::{read_pdf, PdfError, PdfLimits};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FORGE_BROWSER_BIN").map(PathBuf::from) {
        if forge_which::is_executable(&p) {
            return Some(p);
        }
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| forge_which::find_in(n, &dirs))
}

/// Print `html` to PDF with headless Chromium (bounded: 120 s).
fn print(bin: &Path, dir: &Path, name: &str, html: &str) -> Vec<u8> {
    let src = dir.join(format!("{name}.html"));
    std::fs::write(&src, html).expect("write html");
    let out = dir.join(format!("{name}.pdf"));
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-pdf-header-footer",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--print-to-pdf={}", out.display()))
        .arg(format!("file://{}", src.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    for _ in 0..1200 {
        if child.try_wait().expect("wait").is_some() {
            return std::fs::read(&out).expect("chromium wrote the PDF");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("chromium did not print {name} within 120 s");
}

fn report_html(pages: usize) -> String {
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>Bench report</title></head><body>",
    );
    for p in 1..=pages {
        if p > 1 {
            h.push_str("<div style=\"break-before: page\"></div>");
        }
        h.push_str(&format!("<h1>Section {p}</h1>"));
        for k in 0..6 {
            h.push_str(&format!(
                "<p>Paragraph {k} of section {p}: the quarterly figures show <b>steady</b> growth in \
                 orders, with returns down and shipping times within the agreed service levels; \
                 the table below lists the regions and their totals for the period.</p>"
            ));
        }
    }
    h.push_str("</body></html>");
    h
}

fn bomb(decoded: usize) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    let mut left = decoded;
    while left > 0 {
        let k = left.min(chunk.len());
        e.write_all(&chunk[..k]).expect("deflate");
        left -= k;
    }
    let data = e.finish().expect("deflate");
    let mut v = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n2 0 obj ".to_vec();
    v.extend_from_slice(
        format!(
            "<< /Filter /FlateDecode /Length {} >>\nstream\n",
            data.len()
        )
        .as_bytes(),
    );
    v.extend_from_slice(&data);
    v.extend_from_slice(b"\nendstream endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n");
    v
}

/// Median and 95th percentile of `runs` timed reads (after 3 warm-up reads).
fn time(rt: &tokio::runtime::Runtime, bytes: &[u8], runs: usize) -> (Duration, Duration, usize) {
    let limits = PdfLimits::default();
    let mut pages = 0;
    for _ in 0..3 {
        let _ = rt.block_on(read_pdf(bytes.to_vec(), &limits));
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let input = bytes.to_vec();
            let t = Instant::now();
            let got = rt.block_on(read_pdf(input, &limits));
            let d = t.elapsed();
            match got {
                Ok(doc) => pages = doc.page_count,
                Err(PdfError::TooLarge { .. }) => pages = 0,
                Err(e) => panic!("unexpected: {e}"),
            }
            d
        })
        .collect();
    times.sort();
    (
        times[runs / 2],
        times[(runs * 95 / 100).min(runs - 1)],
        pages,
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    println!("| input | size | pages | read_pdf median | p95 | runs |");
    println!("|---|---|---|---|---|---|");
    match chromium() {
        Some(bin) => {
            for (name, pages, runs) in [("2-page report", 2, 200), ("50-page report", 50, 30)] {
                let pdf = print(
                    &bin,
                    dir.path(),
                    &name.replace(' ', "-"),
                    &report_html(pages),
                );
                let (med, p95, got) = time(&rt, &pdf, runs);
                println!(
                    "| Chromium: {name} | {} KiB | {got} | {:.2} ms | {:.2} ms | {runs} |",
                    pdf.len() / 1024,
                    med.as_secs_f64() * 1e3,
                    p95.as_secs_f64() * 1e3
                );
            }
        }
        None => eprintln!("no Chromium found: the Chromium rows are left out"),
    }
    let b = bomb(PdfLimits::default().max_decoded_bytes + 1024);
    let (med, p95, _) = time(&rt, &b, 5);
    println!(
        "| deflate bomb over 256 MiB (refused: TooLarge) | {} KiB | - | {:.0} ms | {:.0} ms | 5 |",
        b.len() / 1024,
        med.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3
    );
}
