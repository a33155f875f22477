//! `forge_tools::pdf`: a two-page PDF printed by real Chromium reads back page by page with its
//! title; 100 malformed and hostile PDFs made here (truncations, bad xref, huge object counts,
//! deflate bombs, deep nesting, garbage streams, encryption) each give `Ok` or `Err`, never a
//! panic, and a hang would become the reader's own `Timeout` error. `http_request` and
//! `web_fetch` of the Chromium PDF served by a loopback site through the real egress client show
//! the same text `read_pdf` gives, read on by `page`, redact secrets, and name a broken PDF.

// The hostile-corpus test prints its tally (which input gave what) for whoever reads the log.
#![allow(clippy::print_stderr)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use std::sync::Arc;

use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::EgressPolicy;
use forge_testkit::gates;
use forge_testkit::site::{Response, Site};
use forge_tools::builtins::http::{HttpRequest, WebFetch, DEFAULT_MAX_BODY_BYTES};
use forge_tools::pdf::{read_pdf, render_pdf_text, PdfError, PdfLimits};
use forge_tools::{Secret, SecretValue, Secrets, Tool, ToolContext, ToolError};
use serde_json::json;

/// The sentences the test page prints, one per page.
pub const SENTENCE_A: &str = "Alpha invoice seventeen lists three blue widgets.";
pub const SENTENCE_B: &str = "Bravo statement closes with a balance of nine euros.";
pub const TITLE: &str = "Quarterly Widget Report";

/// The Chromium to print with (FORGE_BROWSER_BIN, then PATH), or `None` after a skip note (a
/// failure under FORGE_REQUIRE_BROWSER=1).
fn chromium(test: &str) -> Option<PathBuf> {
    let explicit = std::env::var_os("FORGE_BROWSER_BIN")
        .map(PathBuf::from)
        .filter(|p| forge_which::is_executable(p));
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let found = explicit.or_else(|| {
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find_map(|n| forge_which::find_in(n, &dirs))
    });
    if found.is_none() {
        gates::skip(&format!(
            "{test}: no Chromium found; install it with scripts/install-deps.sh browser"
        ));
    }
    found
}

/// Print a two-page HTML page (sentence A on page 1, B on page 2) to PDF with real headless
/// Chromium, in `dir`; returns the PDF's bytes. Panics when Chromium fails or takes over 90 s.
pub fn chromium_two_page_pdf(bin: &Path, dir: &Path) -> Vec<u8> {
    let html = dir.join("two-pages.html");
    std::fs::write(
        &html,
        format!(
            "<!doctype html><html><head><meta charset=utf-8><title>{TITLE}</title></head><body>\
             <p>{}</p><div style=\"break-before: page\"></div><p>{SENTENCE_B}</p>\
             </body></html>",
            // One word in bold: a run of its own on the same line, which must still read as
            // one sentence with single spaces.
            SENTENCE_A.replace("three blue", "three <b>blue</b>")
        ),
    )
    .unwrap();
    let out = dir.join("two-pages.pdf");
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
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    // Bounded wait: 90 s in 100 ms steps, then kill.
    let mut status = None;
    for _ in 0..900 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("chromium did not print the PDF within 90 s");
    }
    let bytes = std::fs::read(&out).expect("chromium wrote the PDF");
    assert!(bytes.starts_with(b"%PDF-"), "not a PDF");
    bytes
}

/// Collapse all whitespace runs to one space (extraction may break lines differently).
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn chromium_pdf_reads_back_page_by_page_with_its_title() {
    let Some(bin) = chromium("chromium_pdf_reads_back_page_by_page_with_its_title") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bytes = chromium_two_page_pdf(&bin, dir.path());
    let doc = read_pdf(bytes, &PdfLimits::default()).await.expect("reads");
    assert_eq!(doc.title.as_deref(), Some(TITLE));
    assert_eq!(doc.page_count, 2);
    assert_eq!(doc.pages.len(), 2);
    // Each sentence fits one line: the page's text is exactly it (the bold run joined with
    // single spaces, no line break inside).
    assert_eq!(doc.pages[0], SENTENCE_A);
    assert_eq!(doc.pages[1], SENTENCE_B);
    let (p1, p2) = (squash(&doc.pages[0]), squash(&doc.pages[1]));
    assert!(p1.contains(SENTENCE_A), "page 1: {p1:?}");
    assert!(!p1.contains(SENTENCE_B), "page 1: {p1:?}");
    assert!(p2.contains(SENTENCE_B), "page 2: {p2:?}");
    assert!(!p2.contains(SENTENCE_A), "page 2: {p2:?}");

    // What a tool shows: both pages under a roomy budget; from page 2 only B; a budget that holds
    // page 1 only says how to read on.
    let all = render_pdf_text(&doc, 1, 100_000);
    assert!(
        all.starts_with(&format!("PDF document: {TITLE} (2 pages)\n")),
        "{all}"
    );
    assert!(squash(&all).contains(SENTENCE_A) && squash(&all).contains(SENTENCE_B));
    let second = render_pdf_text(&doc, 2, 100_000);
    assert!(squash(&second).contains(SENTENCE_B) && !squash(&second).contains(SENTENCE_A));
    let head = format!("PDF document: {TITLE} (2 pages)\n");
    let first_only = render_pdf_text(&doc, 1, head.len() + doc.pages[0].len() + 40);
    assert!(squash(&first_only).contains(SENTENCE_A), "{first_only}");
    assert!(!squash(&first_only).contains(SENTENCE_B), "{first_only}");
    assert!(
        first_only.contains("(page 2 not shown: read on with page: 2)"),
        "{first_only}"
    );
}

// ---- malformed and hostile inputs ---------------------------------------------------------------

/// zlib-compress `data`.
fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// zlib stream of `n` zero bytes, compressed chunk by chunk (never holds `n` bytes).
fn zero_bomb(n: usize) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        e.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
    e.finish().unwrap()
}

/// A well-formed PDF from `objects` (object 1 must be the catalog), with a correct xref table and
/// `trailer_extra` added to the trailer dictionary.
fn build_pdf(objects: &[Vec<u8>], trailer_extra: &str) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in &offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R {trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn stream_obj(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut v = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\nendstream");
    v
}

/// A small valid one-page PDF whose page content is `content` (Flate-compressed when `flate`).
fn simple_pdf(content: &[u8], flate: bool) -> Vec<u8> {
    let stream = if flate {
        stream_obj("/Filter /FlateDecode", &deflate(content))
    } else {
        stream_obj("", content)
    };
    build_pdf(
        &[
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
            stream,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec(),
        ],
        "",
    )
}

/// One page whose content stream is `stream` (already encoded, dict given).
fn pdf_with_content_stream(dict: &str, data: &[u8]) -> Vec<u8> {
    build_pdf(
        &[
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
            b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
            stream_obj(dict, data),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
        ],
        "",
    )
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The 100 hostile inputs, each with a name.
fn hostile_corpus(limits: &PdfLimits) -> Vec<(String, Vec<u8>)> {
    let mut corpus: Vec<(String, Vec<u8>)> = Vec::new();
    let good = simple_pdf(b"BT /F1 12 Tf 72 700 Td (Hello hostile world) Tj ET", true);

    // 30 truncations of a valid file at offsets spread over its length.
    for k in 0..30 {
        let cut = good.len() * k / 30;
        corpus.push((format!("truncated at {cut}"), good[..cut].to_vec()));
    }
    // 10 bad xrefs: startxref pointing anywhere, garbage table entries, missing trailer.
    for k in 0..10 {
        let mut v = good.clone();
        let at = v.windows(9).rposition(|w| w == b"startxref").unwrap();
        v.truncate(at);
        let target = [0usize, 1, 7, 99, 100_000_000, usize::MAX / 2, 17, 3, 42, 5][k];
        v.extend_from_slice(format!("startxref\n{target}\n%%EOF\n").as_bytes());
        if k >= 5 {
            let x = v.windows(4).position(|w| w == b"xref").unwrap();
            for (j, b) in v[x + 5..x + 60].iter_mut().enumerate() {
                *b = b"0123456789 nfx\n"[(j * 7 + k) % 15];
            }
        }
        corpus.push((format!("bad xref {k}"), v));
    }
    // 8 huge object counts: an xref /Size and /Count far beyond anything real, object numbers
    // near u32::MAX, and many object headers over the object cap.
    for (k, size) in [1u64 << 31, 4_000_000_000, 1 << 40, 9_999_999]
        .into_iter()
        .enumerate()
    {
        let v = build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                format!("<< /Type /Pages /Kids [] /Count {size} >>").into_bytes(),
            ],
            &format!("/Size {size}"),
        );
        corpus.push((format!("huge /Size {k}"), v));
    }
    for k in 0..2 {
        let mut v = b"%PDF-1.7\n".to_vec();
        v.extend_from_slice(format!("{} 0 obj << >> endobj\n", u32::MAX - k).as_bytes());
        v.extend_from_slice(b"trailer << /Root 4294967295 0 R >>\n%%EOF\n");
        corpus.push((format!("object number near u32::MAX {k}"), v));
    }
    for k in 0..2 {
        let n = limits.max_objects + 1 + k * 1000;
        let mut v = b"%PDF-1.7\n".to_vec();
        for i in 1..=n {
            v.extend_from_slice(format!("{i} 0 obj null endobj\n").as_bytes());
        }
        v.extend_from_slice(b"trailer << /Root 1 0 R >>\n%%EOF\n");
        corpus.push((format!("{n} objects"), v));
    }
    // 10 deflate bombs: one stream over the whole budget, many streams adding up past it, a bomb
    // in an object stream, a bomb in a cross-reference stream, a double-deflated bomb.
    let big = limits.max_decoded_bytes + 1024;
    corpus.push((
        "one content-stream bomb".into(),
        pdf_with_content_stream("/Filter /FlateDecode", &zero_bomb(big)),
    ));
    let part = zero_bomb(limits.max_decoded_bytes / 8);
    {
        let mut objs = vec![
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            b"<< /Type /Pages /Kids [] /Count 0 >>".to_vec(),
        ];
        for _ in 0..10 {
            objs.push(stream_obj("/Filter /FlateDecode", &part));
        }
        corpus.push(("10 streams of 1/8 budget".into(), build_pdf(&objs, "")));
    }
    {
        // Ten pages, each with one double-deflated content stream of 1/8 of the budget: the raw
        // scan sees only the small outer layer and each page is under any per-page cap; the
        // load's running total refuses the file.
        let twice = deflate(&part);
        let mut objs = vec![
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            format!(
                "<< /Type /Pages /Kids [{}] /Count 10 >>",
                (0..10)
                    .map(|i| format!("{} 0 R", 3 + 2 * i))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
            .into_bytes(),
        ];
        for i in 0..10 {
            objs.push(
                format!(
                    "<< /Type /Page /Parent 2 0 R /Contents {} 0 R >>",
                    4 + 2 * i
                )
                .into_bytes(),
            );
            objs.push(stream_obj("/Filter [/FlateDecode /FlateDecode]", &twice));
        }
        corpus.push((
            "ten pages of double-deflated 1/8 budget".into(),
            build_pdf(&objs, ""),
        ));
    }
    {
        // Ten cross-reference streams chained by /Prev, each 1/8 of the budget: lopdf decodes
        // them all while reading the structure, each under its per-stream cap; the raw scan's
        // running total refuses the file.
        let mut v = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n".to_vec();
        let mut prev: Option<usize> = None;
        for k in 0..10 {
            let at = v.len();
            let prev_key = prev.map(|p| format!("/Prev {p}")).unwrap_or_default();
            v.extend_from_slice(format!("{} 0 obj\n", k + 2).as_bytes());
            v.extend_from_slice(&stream_obj(
                &format!(
                    "/Type /XRef /Size 3 /W [1 4 2] /Root 1 0 R {prev_key} /Filter /FlateDecode"
                ),
                &part,
            ));
            v.extend_from_slice(b"\nendobj\n");
            prev = Some(at);
        }
        v.extend_from_slice(format!("startxref\n{}\n%%EOF\n", prev.unwrap()).as_bytes());
        corpus.push(("ten xref streams of 1/8 budget".into(), v));
    }
    corpus.push((
        "object-stream bomb".into(),
        build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [] /Count 0 >>".to_vec(),
                stream_obj(
                    "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode",
                    &zero_bomb(big),
                ),
            ],
            "",
        ),
    ));
    {
        // A cross-reference stream bomb: the file's only xref is a stream.
        let mut v = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n".to_vec();
        let at = v.len();
        v.extend_from_slice(&stream_obj(
            "/Type /XRef /Size 3 /W [1 4 2] /Root 1 0 R /Filter /FlateDecode",
            &zero_bomb(big),
        ));
        let mut obj = b"2 0 obj\n".to_vec();
        obj.append(&mut v.split_off(at));
        v.extend_from_slice(&obj);
        v.extend_from_slice(format!("\nendobj\nstartxref\n{at}\n%%EOF\n").as_bytes());
        corpus.push(("xref-stream bomb".into(), v));
    }
    corpus.push((
        "double-deflate bomb".into(),
        pdf_with_content_stream(
            "/Filter [/FlateDecode /FlateDecode]",
            &deflate(&zero_bomb(big)),
        ),
    ));
    corpus.push((
        "ascii-hex then flate bomb".into(),
        pdf_with_content_stream(
            "/Filter [/ASCIIHexDecode /FlateDecode]",
            &zero_bomb(big)
                .iter()
                .flat_map(|b| format!("{b:02x}").into_bytes())
                .collect::<Vec<_>>(),
        ),
    ));
    corpus.push(("raw deflate bomb without zlib header".into(), {
        let z = zero_bomb(big);
        pdf_with_content_stream("/Filter /FlateDecode", &z[2..z.len() - 4])
    }));
    corpus.push(("bomb with a wrong /Length".into(), {
        let mut v = pdf_with_content_stream("/Filter /FlateDecode", &zero_bomb(big));
        let at = v.windows(7).position(|w| w == b"/Length").unwrap();
        v[at + 8] = b'1';
        v
    }));
    // 10 deep nesting: arrays, dictionaries, page trees, content operators, self-references.
    for (k, depth) in [200usize, 5_000, 100_000].into_iter().enumerate() {
        let arr = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        corpus.push((
            format!("nested arrays {k}"),
            build_pdf(
                &[
                    b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                    format!("<< /Type /Pages /Kids [] /Count 0 /X {arr} >>").into_bytes(),
                ],
                "",
            ),
        ));
        let dict = format!("{}{}", "<< /A ".repeat(depth), ">>".repeat(depth));
        corpus.push((
            format!("nested dicts {k}"),
            build_pdf(
                &[
                    b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                    format!("<< /Type /Pages /Kids [] /Count 0 /X {dict} >>").into_bytes(),
                ],
                "",
            ),
        ));
    }
    corpus.push((
        "page tree cycle".into(),
        build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>".to_vec(),
                b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 3 0 R] /Count 1 >>".to_vec(),
            ],
            "",
        ),
    ));
    corpus.push((
        "content operators nested".into(),
        simple_pdf(&b"q ".repeat(200_000), true),
    ));
    corpus.push((
        "reference chain".into(),
        build_pdf(
            &(0..2000)
                .map(|i| {
                    if i == 0 {
                        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec()
                    } else {
                        format!("{} 0 R", i + 2).into_bytes()
                    }
                })
                .collect::<Vec<_>>(),
            "",
        ),
    ));
    corpus.push((
        "string nesting".into(),
        simple_pdf(
            format!(
                "BT /F1 12 Tf {}x{} Tj ET",
                "(".repeat(50_000),
                ")".repeat(50_000)
            )
            .as_bytes(),
            true,
        ),
    ));
    // 20 garbage streams: random bytes under every filter, a random body, and a random file.
    let filters = [
        "/Filter /FlateDecode",
        "/Filter /LZWDecode",
        "/Filter /BrotliDecode",
        "/Filter /ASCII85Decode",
        "/Filter /ASCIIHexDecode",
        "/Filter /RunLengthDecode",
        "/Filter /DCTDecode",
        "/Filter /NoSuchFilter",
        "/Filter [/FlateDecode /LZWDecode /RunLengthDecode]",
        "",
    ];
    for (k, f) in filters.iter().enumerate() {
        corpus.push((
            format!("garbage content under {f:?}"),
            pdf_with_content_stream(f, &noise(k as u64 + 1, 4096)),
        ));
    }
    for k in 0..5 {
        let mut v = good.clone();
        let start = v.len() / 3;
        let n = noise(100 + k, 200);
        v[start..start + 200].copy_from_slice(&n);
        corpus.push((format!("garbage in the middle {k}"), v));
    }
    for k in 0..5 {
        let mut v = b"%PDF-1.4\n".to_vec();
        v.extend(noise(200 + k, 20_000));
        corpus.push((format!("random after a header {k}"), v));
    }
    // 7 structural oddities: a /Prev loop, absurd xref-stream widths and index, a page whose
    // contents is itself, lengths that are negative or point nowhere, a garbage ToUnicode map.
    {
        let mut v = good.clone();
        let at = v.windows(7).rposition(|w| w == b"trailer").unwrap();
        let xref = v.windows(4).position(|w| w == b"xref").unwrap();
        v.splice(
            at + 7..at + 7,
            format!(" << /Prev {xref} >>\ntrailer").into_bytes(),
        );
        corpus.push(("prev loop".into(), v));
    }
    for (k, dict) in [
        "/Type /XRef /Size 3 /W [100 100 100] /Root 1 0 R",
        "/Type /XRef /Size 3 /W [1 2 1] /Index [0 4000000000] /Root 1 0 R",
    ]
    .into_iter()
    .enumerate()
    {
        let mut v = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n".to_vec();
        let at = v.len();
        v.extend_from_slice(b"2 0 obj\n");
        v.extend_from_slice(&stream_obj(dict, &noise(400 + k as u64, 64)));
        v.extend_from_slice(format!("\nendobj\nstartxref\n{at}\n%%EOF\n").as_bytes());
        corpus.push((format!("odd xref stream {k}"), v));
    }
    corpus.push((
        "contents is the page".into(),
        build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /Contents [3 0 R 3 0 R] >>".to_vec(),
            ],
            "",
        ),
    ));
    for (k, len) in ["-5", "99 0 R"].into_iter().enumerate() {
        let mut v = simple_pdf(b"BT /F1 12 Tf (Length trouble) Tj ET", false);
        let at = v.windows(7).position(|w| w == b"/Length").unwrap();
        let end = at + 8 + v[at + 8..].iter().position(|b| *b == b' ').unwrap();
        v.splice(at + 8..end, len.bytes());
        corpus.push((format!("odd /Length {k}"), v));
    }
    corpus.push((
        "garbage ToUnicode".into(),
        build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
                stream_obj("", b"BT /F1 12 Tf <0001000200030004> Tj ET"),
                b"<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /ToUnicode 6 0 R >>".to_vec(),
                stream_obj("/Filter /FlateDecode", &deflate(&noise(500, 3000))),
            ],
            "",
        ),
    ));
    // 5 encrypted (and pretend-encrypted) files.
    for (k, extra) in [
        "/Encrypt << /Filter /Standard /V 1 /R 2 /O <00> /U <00> /P -4 >>",
        "/Encrypt 9 0 R",
        "/Encr#79pt << /Filter /Standard /V 2 /R 3 /Length 128 /O <00> /U <00> /P -1 >>",
        "/Encrypt << /Filter /Standard /V 5 /R 6 >> /ID [<01><02>]",
        "/Encrypt null",
    ]
    .into_iter()
    .enumerate()
    {
        let v = build_pdf(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
                b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>".to_vec(),
                stream_obj("/Filter /FlateDecode", &noise(300 + k as u64, 512)),
            ],
            extra,
        );
        corpus.push((format!("encrypted {k}"), v));
    }
    corpus
}

/// Every hostile input gives Ok or Err, never a panic; the loop's time is bounded by the reader's
/// own timeout per input (a hang becomes `Err(Timeout)`, counted), and by the count of inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_hostile_pdfs_give_ok_or_err_and_never_panic() {
    let limits = PdfLimits {
        max_decoded_bytes: 8 * 1024 * 1024,
        max_objects: 20_000,
        timeout: Duration::from_secs(10),
        ..PdfLimits::default()
    };
    let corpus = hostile_corpus(&limits);
    assert_eq!(corpus.len(), 100, "the corpus is 100 files");
    let (mut ok, mut errs, mut timeouts) = (0, 0, 0);
    let mut by_kind = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (name, bytes) in corpus {
        // read_pdf never panics: a panic here fails the test on this input's name.
        let got = read_pdf(bytes, &limits).await;
        match &got {
            Ok(_) => ok += 1,
            Err(PdfError::Timeout(_)) => timeouts += 1,
            Err(_) => errs += 1,
        }
        let kind = match &got {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{e:?}")
                .split(['(', ' '])
                .next()
                .unwrap_or("")
                .to_string(),
        };
        by_kind.entry(kind).or_default().push(name.clone());
        // The bombs and the object floods are refused by their limits, not read.
        if name.contains("bomb") || name.contains("1/8 budget") {
            assert!(
                matches!(
                    got,
                    Err(PdfError::TooLarge {
                        limit: "max_decoded_bytes",
                        ..
                    })
                ),
                "{name}: {got:?}"
            );
        }
        if name.ends_with(" objects") {
            assert!(
                matches!(
                    got,
                    Err(PdfError::TooLarge {
                        limit: "max_objects",
                        ..
                    })
                ),
                "{name}: {got:?}"
            );
        }
        if name.starts_with("encrypted") && !name.ends_with('4') {
            assert_eq!(got, Err(PdfError::Encrypted), "{name}");
        }
        if let Err(e) = &got {
            assert!(!e.to_string().is_empty());
        }
    }
    eprintln!("hostile corpus: {ok} ok, {errs} errors, {timeouts} timeouts; {by_kind:#?}");
    assert_eq!(ok + errs + timeouts, 100);
    // The full file before any cut reads; a cut at 0 is not a PDF.
    assert!(ok >= 1, "{by_kind:#?}");
}

/// Over the input cap: refused before any parsing, with the limit named.
#[tokio::test]
async fn input_over_the_cap_is_refused_naming_the_limit() {
    let limits = PdfLimits {
        max_input_bytes: 1000,
        ..PdfLimits::default()
    };
    let big = simple_pdf(&b"BT (x) Tj ET ".repeat(200), false);
    assert!(big.len() > 1000);
    let err = read_pdf(big, &limits).await.unwrap_err();
    assert_eq!(
        err,
        PdfError::TooLarge {
            limit: "max_input_bytes",
            max: 1000
        }
    );
    assert!(err.to_string().contains("max_input_bytes"), "{err}");
    let not_pdf = read_pdf(b"<html>hello</html>".to_vec(), &limits).await;
    assert_eq!(not_pdf, Err(PdfError::NotPdf));
}

/// A small hand-made PDF (Helvetica, WinAnsi) reads: the reader is not Chromium-only.
#[tokio::test]
async fn a_simple_type1_pdf_reads() {
    let doc = read_pdf(
        simple_pdf(b"BT /F1 12 Tf 72 700 Td (Hello plain world) Tj ET", true),
        &PdfLimits::default(),
    )
    .await
    .unwrap();
    assert_eq!(doc.page_count, 1);
    assert!(
        doc.pages[0].contains("Hello plain world"),
        "{:?}",
        doc.pages
    );
    assert_eq!(doc.title, None);
}

/// The reader's own timeout turns a slow read into `Err(Timeout)`, and a set stop flag (what a
/// timed-out read leaves for its background thread) ends the work early the same way.
#[tokio::test]
async fn a_read_past_its_timeout_or_stopped_is_a_timeout_error() {
    let pdf = simple_pdf(b"BT /F1 12 Tf 72 700 Td (Slow world) Tj ET", true);
    // Two million text operators (26 MB decoded): far more than a millisecond's work.
    let slow = simple_pdf(&b"BT (x) Tj ET ".repeat(2_000_000), true);
    let limits = PdfLimits {
        timeout: Duration::from_millis(1),
        ..PdfLimits::default()
    };
    let got = read_pdf(slow, &limits).await;
    assert_eq!(got, Err(PdfError::Timeout(Duration::from_millis(1))));
    assert!(got.unwrap_err().to_string().contains("timeout"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stopped = forge_tools::pdf::read_pdf_sync(&pdf, &PdfLimits::default(), stop);
    assert!(matches!(stopped, Err(PdfError::Timeout(_))), "{stopped:?}");
    let free = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let read = forge_tools::pdf::read_pdf_sync(&pdf, &PdfLimits::default(), free).unwrap();
    assert!(read.pages[0].contains("Slow world"), "{read:?}");
}

// ---- http_request and web_fetch -------------------------------------------------------------

const SECRET: &str = "crm-token-7f3a9c1e55d2";

/// A tool context whose egress client allows only `127.0.0.1:port`, with one secret.
fn ctx_for(port: u16) -> (ToolContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let policy = Arc::new(EgressPolicy::allowlist(vec![format!("127.0.0.1:{port}")]).unwrap());
    let mut ctx = ToolContext::new("t", dir.path().join("files"));
    ctx.egress = Some(Arc::new(EgressClient::new(
        policy,
        ClientOptions::default(),
    )));
    ctx.secrets = Secrets::new(
        vec![Secret {
            name: "crm_token".into(),
            value: SecretValue::new(SECRET.into()),
            origins: Vec::new(),
            hosts: vec![format!("127.0.0.1:{port}")],
        }],
        None,
    );
    (ctx, dir)
}

/// The text after the fence's end marker: forge's own lines, not the outside content.
fn after_fence(text: &str) -> &str {
    let end = text.rfind("<<<UNTRUSTED_CONTENT_END").expect("fenced");
    let close = text[end..].find(">>>").unwrap() + end + 3;
    &text[close..]
}

#[tokio::test]
async fn http_request_and_web_fetch_show_a_served_chromium_pdf_as_read_pdf_reads_it() {
    let Some(bin) =
        chromium("http_request_and_web_fetch_show_a_served_chromium_pdf_as_read_pdf_reads_it")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pdf = chromium_two_page_pdf(&bin, dir.path());
    let expected = read_pdf(pdf.clone(), &PdfLimits::default()).await.unwrap();
    let secret_pdf = simple_pdf(
        format!("BT /F1 12 Tf 72 700 Td (Your token is {SECRET} keep it) Tj ET").as_bytes(),
        true,
    );
    let mut broken = b"%PDF-1.7\n".to_vec();
    broken.extend(noise(7, 5000));
    let site = Site::builder()
        .max_connections(50)
        .start(move |r| match r.path.as_str() {
            "/report.pdf" => Response::bytes(200, "application/pdf", pdf.clone()),
            // No PDF media type: the %PDF- header is enough.
            "/download" => Response::bytes(200, "application/octet-stream", pdf.clone()),
            "/token.pdf" => Response::bytes(200, "application/pdf", secret_pdf.clone()),
            "/broken.pdf" => Response::bytes(200, "application/pdf", broken.clone()),
            _ => Response::not_found(),
        });
    let (ctx, _d) = ctx_for(site.port());
    let url = |p: &str| site.url(p);

    // http_request: the whole document under the default budget, as render_pdf_text gives it.
    for path in ["/report.pdf", "/download"] {
        let out = HttpRequest
            .execute(&ctx, json!({"url": url(path)}))
            .await
            .unwrap();
        let whole = render_pdf_text(&expected, 1, DEFAULT_MAX_BODY_BYTES);
        assert!(out.text.contains(&whole), "{path}: {}", out.text);
        assert!(out.text.contains(SENTENCE_A) && out.text.contains(SENTENCE_B));
        let data = out.data.unwrap();
        assert_eq!(data["pdf"]["page_count"], 2, "{data}");
        assert_eq!(data["pdf"]["title"], TITLE, "{data}");
        assert!(data["pdf"]["next_page"].is_null(), "{data}");
    }
    // page: 2 shows page 2 only.
    let out = HttpRequest
        .execute(&ctx, json!({"url": url("/report.pdf"), "page": 2}))
        .await
        .unwrap();
    assert!(out
        .text
        .contains(&render_pdf_text(&expected, 2, DEFAULT_MAX_BODY_BYTES)));
    assert!(
        out.text.contains(SENTENCE_B) && !out.text.contains(SENTENCE_A),
        "{}",
        out.text
    );
    // A budget that holds page 1 only: forge's read-on line, outside the fence.
    let head = format!("PDF document: {TITLE} (2 pages)\n");
    let small = head.len() + SENTENCE_A.len() + 40;
    let out = HttpRequest
        .execute(&ctx, json!({"url": url("/report.pdf"), "max_bytes": small}))
        .await
        .unwrap();
    assert!(
        out.text.contains(SENTENCE_A) && !out.text.contains(SENTENCE_B),
        "{}",
        out.text
    );
    assert!(
        after_fence(&out.text).contains("(page 2 not shown: read on with page: 2)"),
        "{}",
        out.text
    );
    assert_eq!(out.data.unwrap()["pdf"]["next_page"], 2);

    // web_fetch: the same text, and page 2.
    let out = WebFetch
        .execute(&ctx, json!({"url": url("/report.pdf")}))
        .await
        .unwrap();
    assert!(
        out.text.contains(&render_pdf_text(&expected, 1, 20_000)),
        "{}",
        out.text
    );
    let out = WebFetch
        .execute(&ctx, json!({"url": url("/download"), "page": 2}))
        .await
        .unwrap();
    assert!(
        out.text.contains(SENTENCE_B) && !out.text.contains(SENTENCE_A),
        "{}",
        out.text
    );

    // A secret value in the PDF's text is replaced by its name before anything is cut.
    for out in [
        HttpRequest
            .execute(&ctx, json!({"url": url("/token.pdf")}))
            .await
            .unwrap(),
        WebFetch
            .execute(&ctx, json!({"url": url("/token.pdf")}))
            .await
            .unwrap(),
    ] {
        assert!(!out.text.contains(SENTENCE_A));
        assert!(!out.text.contains(SECRET), "{}", out.text);
        assert!(out.text.contains("(secret crm_token)"), "{}", out.text);
    }

    // A broken PDF is a tool error naming the URL and what is wrong.
    for tool in [&HttpRequest as &dyn Tool, &WebFetch] {
        let err = tool
            .execute(&ctx, json!({"url": url("/broken.pdf")}))
            .await
            .unwrap_err();
        let ToolError::Failed(m) = err else {
            panic!("{}: {err:?}", tool.name());
        };
        assert!(
            m.contains("/broken.pdf") && m.contains("PDF not read"),
            "{m}"
        );
    }
    // A bad page argument is the caller's error.
    let err = WebFetch
        .execute(&ctx, json!({"url": url("/report.pdf"), "page": 0}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidInput(_)), "{err:?}");
}
