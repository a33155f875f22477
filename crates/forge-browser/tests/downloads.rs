//! Downloads for real: Chromium through the real egress proxy against loopback sites; each
//! download lands in the calling workspace's `downloads/` with exactly the served bytes, is
//! reported by the click that started it and listed in the result's `files` (the runtime's
//! artifacts); refused hosts see nothing; the size cap cancels; hostile names are made safe.
//! One Chromium for the file (downloads capped at 1 MiB), each test with its own session and
//! its own workspace; a second one, started only by the test that needs it, caps sessions at two
//! downloads. A long download comes from [`slow_server`], a loopback server in this file that
//! holds its body back until the test lets it go.
// Printing is allowed here (test output: skip notices and diagnostics).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use forge_browser::{browser_tools, BrowserConfig, BrowserManager, BrowserToolOptions, RefusalLog};
use forge_testkit::browser::{proxy, remove_at_exit};

use forge_testkit::site::{Request, Response, Site};
use forge_tools::{ToolContext, ToolOutput};
use serde_json::{json, Value};

const CAP: u64 = 1024 * 1024;

struct Fixture {
    rt: tokio::runtime::Runtime,
    manager: Arc<BrowserManager>,
    site: Site,
    refused: Site,
    /// Lets [`slow_server`] send the rest of its body.
    release: tokio::sync::watch::Sender<bool>,
    /// What a second manager needs (the same proxy and refusal log): [`Fixture::two_files`].
    proxy: SocketAddr,
    log: RefusalLog,
    tmp: PathBuf,
    two_files: OnceLock<Arc<BrowserManager>>,
}

/// The bytes [`slow_server`] serves as `slow.bin`.
const SLOW_LEN: usize = 256 * 1024;
const SLOW_CHUNK: usize = 16 * 1024;

/// A loopback HTTP server whose `/slow.bin` is a download that does not end until the test
/// says so: it sends the headers (with the full Content-Length) and the first chunk at once,
/// then waits for `release` (at most 60 s), then sends the rest in chunks with short pauses.
/// The testkit's `Site` answers with whole bodies, so it cannot hold one back; this server is
/// this file's only user of that, so it lives here. Bounded: 16 connections, each request's
/// head read within 10 s and 16 KiB.
async fn slow_server(
    listener: tokio::net::TcpListener,
    release: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for _ in 0..16 {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let mut release = release.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(Duration::from_secs(10), async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            })
            .await;
            if read != Ok(true) {
                return;
            }
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            if !line.contains(" /slow.bin ") && !line.contains("/slow.bin HTTP") {
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                return;
            }
            let bytes = body(SLOW_LEN, 9);
            let headers = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {SLOW_LEN}\r\nContent-Disposition: attachment; filename=\"slow.bin\"\r\nConnection: close\r\n\r\n"
            );
            if sock.write_all(headers.as_bytes()).await.is_err() {
                return;
            }
            let mut chunks = bytes.chunks(SLOW_CHUNK);
            if let Some(first) = chunks.next() {
                if sock.write_all(first).await.is_err() || sock.flush().await.is_err() {
                    return;
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(60), release.wait_for(|r| *r)).await;
            for c in chunks {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if sock.write_all(c).await.is_err() {
                    return;
                }
            }
            let _ = sock.flush().await;
        });
    }
}

/// Bytes that are not text (every byte value), `n` long, distinct per `seed`.
fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn attachment(name: &str, bytes: Vec<u8>) -> Response {
    Response::bytes(200, "application/octet-stream", bytes).header(
        "Content-Disposition",
        &format!("attachment; filename=\"{name}\""),
    )
}

/// The PDF `/doc.pdf` serves: made by the test (browser_pdf of `/twopage.html`).
static PDF: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

const SENTENCE_1: &str = "The walrus counted eleven lanterns on the pier.";
const SENTENCE_2: &str = "A violet kite drifted over the quiet harbour.";

fn serve(r: &Request, refused: &str, slow: &str) -> Response {
    let path = r.path.split('?').next().unwrap_or(&r.path);
    match path {
        "/twopage.html" => Response::html(format!(
            r#"<!doctype html><title>Two pages</title>
<p style="break-after: page">{SENTENCE_1}</p><p>{SENTENCE_2}</p>"#
        )),
        "/doc.pdf" => Response::bytes(
            200,
            "application/pdf",
            PDF.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        ),
        "/page.html" => Response::html(format!(
            r#"<!doctype html><title>Files</title>
<a id="csv" href="/files/report.csv" download="report.csv">CSV report</a>
<a id="inv" href="/invoice">Invoice</a>
<button id="blob" onclick="
  const b = new Blob([new Uint8Array([0,1,2,250,251,252,10,13,65])], {{type: 'application/octet-stream'}});
  const a = document.createElement('a'); a.href = window.URL.createObjectURL(b); a.download = 'notes.bin';
  document.body.appendChild(a); a.click();">Blob</button>
<a id="data" href="data:application/octet-stream;base64,AAEC/f7/" download="bytes.bin">Data</a>
<a id="refused" href="{refused}/secret.bin" download="secret.bin">Refused</a>
<a id="big" href="/big">Big</a>
<a id="slow" href="{slow}/slow.bin">Slow</a>
<button id="bigblob" onclick="
  const u = new Uint8Array(2 * 1024 * 1024); u.fill(65);
  const a = document.createElement('a'); a.href = window.URL.createObjectURL(new Blob([u]));
  a.download = 'big-blob.bin'; document.body.appendChild(a); a.click();">Big Blob</button>
<button id="bigdata" onclick="
  const a = document.createElement('a');
  a.href = 'data:application/octet-stream;base64,' + 'QUJD'.repeat(2 * 1024 * 1024 / 3 + 1);
  a.download = 'big-data.bin'; document.body.appendChild(a); a.click();">Big data</button>
<a id="h1" href="/hostile/1">H1</a> <a id="h2" href="/hostile/2">H2</a>
<a id="h3" href="/hostile/3">H3</a> <a id="h4" href="/hostile/4">H4</a>"#
        )),
        "/files/report.csv" => Response::bytes(200, "text/csv", body(48 * 1024, 1)),
        "/invoice" => Response::bytes(200, "application/pdf", body(3000, 2)).header(
            "Content-Disposition",
            "attachment; filename=\"invoice-2026-11.pdf\"",
        ),
        "/big" => attachment("big.bin", body(5 * 1024 * 1024, 3)),
        "/hostile/1" => attachment("../../x", body(10, 4)),
        "/hostile/2" => attachment(".bashrc", body(11, 5)),
        "/hostile/3" => attachment(&format!("{}.txt", "n".repeat(300)), body(12, 6)),
        "/hostile/4" => Response::bytes(200, "application/octet-stream", body(13, 7)).header(
            "Content-Disposition",
            "attachment; filename*=UTF-8''a%01b%0Ac%7Fd%E2%80%AEe.txt",
        ),
        _ => Response::not_found(),
    }
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        forge_testkit::gates::require_browser("forge-browser downloads tests")?;
        let refused = Site::start(|_: &Request| {
            Response::bytes(200, "application/octet-stream", b"SECRET".to_vec())
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let slow = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the slow server");
        let slow_addr = slow.local_addr().expect("the slow server's address");
        let (release, release_rx) = tokio::sync::watch::channel(false);
        rt.spawn(slow_server(slow, release_rx));
        let refused_url = format!("http://{}", refused.addr);
        let slow_url = format!("http://{slow_addr}");
        let site = Site::start(move |r: &Request| serve(r, &refused_url, &slow_url));
        let tmp = tempfile::tempdir().expect("temp dir").keep();
        remove_at_exit(&tmp);
        // The site and the slow server are allowed; `refused` is not.
        let (addr, _handle, log) = rt.block_on(proxy(&[site.entry(), slow_addr.to_string()]));
        // The proxy lives as long as the runtime's tasks; keep its handle alive.
        std::mem::forget(_handle);
        let manager = Arc::new(manager(addr, log.clone(), &tmp, 20));
        Some(Fixture {
            rt,
            manager,
            site,
            refused,
            release,
            proxy: addr,
            log,
            tmp,
            two_files: OnceLock::new(),
        })
    })
    .as_ref()
}

/// A manager on the proxy at `addr` with downloads capped at [`CAP`] bytes and `max_files`.
fn manager(addr: SocketAddr, log: RefusalLog, tmp: &Path, max_files: usize) -> BrowserManager {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.downloads.max_bytes = CAP;
    cfg.downloads.max_files = max_files;
    // One session per test, all open until the file ends.
    cfg.max_sessions = 16;
    BrowserManager::new(cfg).with_refusals(log)
}

impl Fixture {
    /// A second Chromium whose sessions may start two downloads each (started on first use).
    fn two_files(&self) -> Arc<BrowserManager> {
        self.two_files
            .get_or_init(|| Arc::new(manager(self.proxy, self.log.clone(), &self.tmp, 2)))
            .clone()
    }

    fn try_call(
        &self,
        session: &str,
        files: &Path,
        name: &str,
        input: Value,
    ) -> Result<ToolOutput, forge_tools::ToolError> {
        self.try_call_on(&self.manager, session, files, name, input)
    }

    fn try_call_on(
        &self,
        manager: &Arc<BrowserManager>,
        session: &str,
        files: &Path,
        name: &str,
        input: Value,
    ) -> Result<ToolOutput, forge_tools::ToolError> {
        let tool = browser_tools(manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == name)
            .expect("tool exists");
        let ctx = ToolContext::new(session, files);
        self.rt.block_on(tool.execute(&ctx, input))
    }

    fn call(&self, session: &str, files: &Path, name: &str, input: Value) -> ToolOutput {
        match self.try_call(session, files, name, input.clone()) {
            Ok(o) => o,
            Err(e) => panic!("{name} {input} failed: {e}"),
        }
    }

    fn open(&self, session: &str, files: &Path) {
        let out = self.call(
            session,
            files,
            "browser_navigate",
            json!({"url": self.site.url("/page.html")}),
        );
        assert!(out.text.contains("HTTP 200"), "{}", out.text);
    }
}

/// The `files` entries of a result.
fn files_of(out: &ToolOutput) -> Vec<Value> {
    out.data
        .as_ref()
        .and_then(|d| d.get("files"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The names in `dir` (not the `.incoming` staging dir).
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".incoming")
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn incoming_is_empty(dir: &Path) -> bool {
    names_in(&dir.join(".incoming")).is_empty()
}

#[test]
fn each_click_reports_its_download_and_the_file_has_the_served_bytes() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-basic", ws.path());
    let cases = [
        (
            "#csv",
            "report.csv",
            body(48 * 1024, 1),
            "downloaded: report.csv (48 KB, text/csv)",
        ),
        (
            "#inv",
            "invoice-2026-11.pdf",
            body(3000, 2),
            "downloaded: invoice-2026-11.pdf (3 KB, application/pdf)",
        ),
    ];
    for (sel, name, bytes, line) in cases {
        let out = f.call(
            "dl-basic",
            ws.path(),
            "browser_click",
            json!({"selector": sel}),
        );
        assert!(out.text.contains(line), "{sel}: {}", out.text);
        // A link whose navigation turned into the download loaded no page: the status says
        // only that it started a download (it said "navigated (HTTP 200)" at times).
        assert!(
            status(&out).ends_with(": started a download"),
            "{sel}: {}",
            out.text
        );
        let path = ws.path().join("downloads").join(name);
        assert_eq!(
            std::fs::read(&path).expect("the downloaded file"),
            bytes,
            "{sel}"
        );
        let files = files_of(&out);
        assert_eq!(files.len(), 1, "{sel}: {files:?}");
        assert_eq!(files[0]["filename"], name);
        assert_eq!(files[0]["path"], path.to_string_lossy().as_ref());
        assert_eq!(files[0]["size_bytes"], bytes.len());
    }
    // The same link again: a second file with a suffix, the first untouched.
    let out = f.call(
        "dl-basic",
        ws.path(),
        "browser_click",
        json!({"selector": "#csv"}),
    );
    assert!(
        out.text.contains("downloaded: report-2.csv"),
        "{}",
        out.text
    );
    assert_eq!(
        names_in(&ws.path().join("downloads")),
        ["invoice-2026-11.pdf", "report-2.csv", "report.csv"]
    );
    assert!(incoming_is_empty(&ws.path().join("downloads")));
}

#[test]
fn navigating_to_a_download_reports_it_and_keeps_the_page() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-nav", ws.path());
    let out = f.call(
        "dl-nav",
        ws.path(),
        "browser_navigate",
        json!({"url": f.site.url("/invoice")}),
    );
    assert!(out.text.contains("is a download"), "{}", out.text);
    assert!(
        out.text
            .contains("downloaded: invoice-2026-11.pdf (3 KB, application/pdf)"),
        "{}",
        out.text
    );
    assert!(out.text.contains("page: Files"), "{}", out.text);
    assert_eq!(
        std::fs::read(ws.path().join("downloads/invoice-2026-11.pdf")).expect("file"),
        body(3000, 2)
    );
    assert_eq!(files_of(&out).len(), 1);
    // Reported once: waiting for downloads now finds none running and reports nothing again.
    let again = f.call(
        "dl-nav",
        ws.path(),
        "browser_state",
        json!({"wait_for": {"download": true}}),
    );
    assert!(
        again
            .text
            .starts_with("observation (no download was running):"),
        "{}",
        again.text
    );
    assert!(!again.text.contains("downloaded:"), "{}", again.text);
    assert!(files_of(&again).is_empty());
}

#[test]
fn a_download_from_a_refused_host_is_refused_and_the_host_sees_nothing() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-refused", ws.path());
    // A cross-origin `<a download>` is a navigation for Chromium: refused as one, with the
    // proxy's clear message.
    let err = f
        .try_call(
            "dl-refused",
            ws.path(),
            "browser_click",
            json!({"selector": "#refused"}),
        )
        .expect_err("a refused host is refused");
    assert!(
        err.to_string().contains("blocked by egress policy"),
        "{err}"
    );
    assert_eq!(f.refused.hits(), 0, "the refused host was reached");
    assert!(names_in(&ws.path().join("downloads")).is_empty());
    assert!(incoming_is_empty(&ws.path().join("downloads")));
}

#[test]
fn a_download_over_max_bytes_is_cancelled_and_nothing_is_left() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-big", ws.path());
    let out = f.call(
        "dl-big",
        ws.path(),
        "browser_click",
        json!({"selector": "#big"}),
    );
    assert!(
        out.text.contains(
            "download of big.bin cancelled: larger than forge.yaml browser.downloads.max_bytes"
        ),
        "{}",
        out.text
    );
    assert!(files_of(&out).is_empty());
    // Cancelling is asynchronous in Chromium: give its file removal a bounded moment.
    let dir = ws.path().join("downloads");
    for _ in 0..50 {
        if incoming_is_empty(&dir) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    assert!(
        incoming_is_empty(&dir),
        "{:?}",
        names_in(&dir.join(".incoming"))
    );
}

#[test]
fn hostile_names_land_sanitised_inside_the_workspace() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-hostile", ws.path());
    let mut got = Vec::new();
    for (i, seed) in [(1, 4u8), (2, 5), (3, 6), (4, 7)] {
        let out = f.call(
            "dl-hostile",
            ws.path(),
            "browser_click",
            json!({"selector": format!("#h{i}")}),
        );
        let files = files_of(&out);
        assert_eq!(files.len(), 1, "h{i}: {}", out.text);
        let name = files[0]["filename"].as_str().expect("name").to_string();
        let path = ws.path().join("downloads").join(&name);
        assert_eq!(files[0]["path"], path.to_string_lossy().as_ref());
        assert_eq!(
            std::fs::read(&path).expect("file"),
            body(9 + i, seed),
            "h{i}"
        );
        got.push(name);
    }
    // Chromium's own sanitising runs first ("../../x" arrives as "_.._x"), then forge's.
    assert!(got[0].ends_with('x') && got[0].len() <= 5, "{}", got[0]);
    assert!(got[1].contains("bashrc"), "{}", got[1]);
    assert!(
        got[2].chars().count() <= 120 && got[2].ends_with(".txt"),
        "{}",
        got[2]
    );
    for n in &got {
        assert!(!n.starts_with('.'), "{n}");
        assert!(!n.contains('/') && !n.contains('\\'), "{n}");
        assert!(
            !n.chars().any(|c| c.is_control() || c == '\u{202E}'),
            "{n:?}"
        );
    }
    // Nothing escaped the workspace's downloads folder.
    assert_eq!(names_in(ws.path()), ["downloads"]);
    assert!(!ws.path().join("x").exists());
}

#[test]
fn blob_and_data_downloads_by_page_script_are_reported_like_the_others() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-blob", ws.path());
    let out = f.call(
        "dl-blob",
        ws.path(),
        "browser_click",
        json!({"selector": "#blob"}),
    );
    assert!(
        out.text.contains("downloaded: notes.bin (9 B, "),
        "{}",
        out.text
    );
    assert_eq!(
        std::fs::read(ws.path().join("downloads/notes.bin")).expect("file"),
        vec![0, 1, 2, 250, 251, 252, 10, 13, 65]
    );
    assert_eq!(files_of(&out).len(), 1);
    // A `data:` link with `download` works the same.
    let out = f.call(
        "dl-blob",
        ws.path(),
        "browser_click",
        json!({"selector": "#data"}),
    );
    assert!(
        out.text.contains("downloaded: bytes.bin (6 B, "),
        "{}",
        out.text
    );
    assert_eq!(
        std::fs::read(ws.path().join("downloads/bytes.bin")).expect("file"),
        vec![0, 1, 2, 253, 254, 255]
    );
}

#[test]
fn browser_pdf_prints_the_page_into_the_workspace() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("pdf", ws.path());
    let out = f.call(
        "pdf",
        ws.path(),
        "browser_pdf",
        json!({"filename": "../../.page", "landscape": true, "page_ranges": "1"}),
    );
    let data = out.data.clone().expect("data");
    assert_eq!(data["filename"], "page.pdf", "{}", out.text);
    assert_eq!(data["mime_type"], "application/pdf");
    let path = ws.path().join("page.pdf");
    assert_eq!(data["path"], path.to_string_lossy().as_ref());
    let bytes = std::fs::read(&path).expect("the PDF");
    assert!(bytes.starts_with(b"%PDF-"), "not a PDF");
    let tail = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(64)..]).to_string();
    assert!(tail.contains("%%EOF"), "{tail}");
    assert_eq!(data["size_bytes"], bytes.len());
    // The same name again: a suffix, the first file untouched.
    let again = f.call(
        "pdf",
        ws.path(),
        "browser_pdf",
        json!({"filename": "page.pdf"}),
    );
    assert_eq!(again.data.expect("data")["filename"], "page-2.pdf");
    assert_eq!(std::fs::read(&path).expect("first PDF"), bytes);
    // A bad range is refused with a clear message, and nothing is written.
    let err = f
        .try_call(
            "pdf",
            ws.path(),
            "browser_pdf",
            json!({"filename": "x.pdf", "page_ranges": "1; rm"}),
        )
        .expect_err("a bad range");
    assert!(err.to_string().contains("page_ranges"), "{err}");
    assert!(!ws.path().join("x.pdf").exists());
}

#[test]
fn a_pdf_a_navigation_lands_on_is_shown_as_a_document_and_read_on_by_page() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    // The test makes its two-page PDF with Chromium's own printToPDF (browser_pdf).
    f.call(
        "pdf-read",
        ws.path(),
        "browser_navigate",
        json!({"url": f.site.url("/twopage.html")}),
    );
    let made = f.call(
        "pdf-read",
        ws.path(),
        "browser_pdf",
        json!({"filename": "two.pdf"}),
    );
    let bytes = std::fs::read(ws.path().join("two.pdf")).expect("the printed PDF");
    assert!(bytes.starts_with(b"%PDF-"), "{}", made.text);
    *PDF.lock().unwrap_or_else(|p| p.into_inner()) = bytes.clone();
    // Navigating to it: headless Chromium downloads it; the call shows the document.
    let out = f.call(
        "pdf-read",
        ws.path(),
        "browser_navigate",
        json!({"url": f.site.url("/doc.pdf")}),
    );
    assert!(out.text.contains("downloaded: doc.pdf ("), "{}", out.text);
    assert!(out.text.contains("(2 pages)"), "{}", out.text);
    assert!(out.text.contains(SENTENCE_1), "{}", out.text);
    assert_eq!(
        std::fs::read(ws.path().join("downloads/doc.pdf")).expect("kept"),
        bytes
    );
    // Page 2 on its own: the other sentence, not the first.
    let p2 = f.call("pdf-read", ws.path(), "browser_extract", json!({"page": 2}));
    assert!(p2.text.contains(SENTENCE_2), "{}", p2.text);
    assert!(!p2.text.contains(SENTENCE_1), "{}", p2.text);
    // A page past the end is a clear error.
    let err = f
        .try_call("pdf-read", ws.path(), "browser_extract", json!({"page": 9}))
        .expect_err("past the end");
    assert!(err.to_string().contains("past the end (2 pages)"), "{err}");
}

#[test]
fn browser_pdf_text_holds_the_page_sentence() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.call(
        "pdf-text",
        ws.path(),
        "browser_navigate",
        json!({"url": f.site.url("/twopage.html")}),
    );
    f.call(
        "pdf-text",
        ws.path(),
        "browser_pdf",
        json!({"filename": "page.pdf"}),
    );
    let bytes = std::fs::read(ws.path().join("page.pdf")).expect("the PDF");
    let doc =
        f.rt.block_on(forge_tools::pdf::read_pdf(
            bytes,
            &forge_tools::pdf::PdfLimits::default(),
        ))
        .expect("a readable PDF");
    assert_eq!(doc.page_count, 2);
    assert!(doc.pages[0].contains(SENTENCE_1), "{:?}", doc.pages);
    assert!(doc.pages[1].contains(SENTENCE_2), "{:?}", doc.pages);
}

/// The status line of a result (its first line).
fn status(out: &ToolOutput) -> &str {
    out.text.lines().next().unwrap_or("")
}

/// Wait (bounded: 50 rounds of 100 ms) for Chromium's asynchronous cancel to let go of its
/// partial files, then say whether `.incoming` is empty.
fn incoming_empties(dir: &Path) -> bool {
    for _ in 0..50 {
        if incoming_is_empty(dir) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    incoming_is_empty(dir)
}

#[test]
fn a_long_download_is_reported_running_then_its_end_by_wait_for_download() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-slow", ws.path());
    // The server holds the body back: the click's own wait for the download runs out.
    let out = f.call(
        "dl-slow",
        ws.path(),
        "browser_click",
        json!({"selector": "#slow"}),
    );
    assert!(
        status(&out).ends_with(": started a download"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("downloading: slow.bin (") && out.text.contains(" of 256 KB so far"),
        "{}",
        out.text
    );
    assert!(!out.text.contains("downloaded:"), "{}", out.text);
    assert!(files_of(&out).is_empty());
    let dir = ws.path().join("downloads");
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    // Let it finish; waiting for downloads reports its end (a few waits at most, each ≤5 s).
    f.release.send_replace(true);
    let mut done = None;
    for _ in 0..6 {
        let out = f.call(
            "dl-slow",
            ws.path(),
            "browser_state",
            json!({"wait_for": {"download": true}}),
        );
        if out.text.contains("downloaded: slow.bin") {
            done = Some(out);
            break;
        }
        assert!(
            status(&out).contains("a download is still running"),
            "{}",
            out.text
        );
    }
    let out = done.expect("the download was reported finished");
    assert!(
        status(&out).contains("until the downloads ended"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains(
            "downloaded: slow.bin (256 KB, application/octet-stream) into downloads/slow.bin"
        ),
        "{}",
        out.text
    );
    let files = files_of(&out);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["filename"], "slow.bin");
    assert_eq!(files[0]["size_bytes"], SLOW_LEN);
    assert_eq!(
        std::fs::read(dir.join("slow.bin")).expect("the downloaded file"),
        body(SLOW_LEN, 9)
    );
    assert!(incoming_is_empty(&dir));
    // Reported once.
    let again = f.call(
        "dl-slow",
        ws.path(),
        "browser_state",
        json!({"wait_for": {"download": true}}),
    );
    assert!(
        status(&again).contains("no download was running"),
        "{}",
        again.text
    );
    assert!(!again.text.contains("downloaded:"), "{}", again.text);
    assert!(files_of(&again).is_empty());
}

#[test]
fn blob_and_data_downloads_over_max_bytes_are_cancelled_and_nothing_is_left() {
    let Some(f) = fixture() else { return };
    let ws = tempfile::tempdir().expect("workspace");
    f.open("dl-bigblob", ws.path());
    let dir = ws.path().join("downloads");
    for (sel, name) in [("#bigblob", "big-blob.bin"), ("#bigdata", "big-data.bin")] {
        let out = f.call(
            "dl-bigblob",
            ws.path(),
            "browser_click",
            json!({"selector": sel}),
        );
        assert!(
            out.text.contains(&format!(
                "download of {name} cancelled: larger than forge.yaml browser.downloads.max_bytes ("
            )) && out.text.contains("(2.0 MB > 1.0 MB); nothing was kept"),
            "{sel}: {}",
            out.text
        );
        assert!(files_of(&out).is_empty(), "{sel}");
        assert!(
            incoming_empties(&dir),
            "{sel}: {:?}",
            names_in(&dir.join(".incoming"))
        );
        assert!(names_in(&dir).is_empty(), "{sel}: {:?}", names_in(&dir));
    }
}

#[test]
fn past_max_files_a_download_of_any_kind_is_refused() {
    let Some(f) = fixture() else { return };
    let two = f.two_files();
    let ws = tempfile::tempdir().expect("workspace");
    let call = |input: Value, tool: &str| match f.try_call_on(
        &two,
        "dl-two",
        ws.path(),
        tool,
        input.clone(),
    ) {
        Ok(o) => o,
        Err(e) => panic!("{tool} {input} failed: {e}"),
    };
    let out = call(json!({"url": f.site.url("/page.html")}), "browser_navigate");
    assert!(out.text.contains("HTTP 200"), "{}", out.text);
    // A page script's Blob and a data: link are the two this session may start.
    let out = call(json!({"selector": "#blob"}), "browser_click");
    assert!(out.text.contains("downloaded: notes.bin ("), "{}", out.text);
    let out = call(json!({"selector": "#data"}), "browser_click");
    assert!(out.text.contains("downloaded: bytes.bin ("), "{}", out.text);
    // The third, of each kind, is refused with the setting named; nothing is kept.
    let dir = ws.path().join("downloads");
    for (sel, name) in [
        ("#csv", "report.csv"),
        ("#blob", "notes.bin"),
        ("#data", "bytes.bin"),
    ] {
        let out = call(json!({"selector": sel}), "browser_click");
        assert!(
            out.text.contains(&format!(
                "download of {name} cancelled: this session already started 2 downloads (forge.yaml browser.downloads.max_files)"
            )),
            "{sel}: {}",
            out.text
        );
        assert!(files_of(&out).is_empty(), "{sel}: {}", out.text);
        assert!(
            incoming_empties(&dir),
            "{sel}: {:?}",
            names_in(&dir.join(".incoming"))
        );
    }
    assert_eq!(names_in(&dir), ["bytes.bin", "notes.bin"]);
}
