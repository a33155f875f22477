//! Reading PDFs: title, page count and text page by page, with bounded time and memory on broken
//! or hostile input ([`read_pdf`]), and the text a tool shows under a size budget
//! ([`render_pdf_text`]). Used by `http_request`/`web_fetch` and by the browser when a navigation
//! lands on a PDF.
//!
//! The parser is `lopdf` (pure Rust). What holds, and how (see also docs/tools.md "Reading PDFs"):
//!
//! - **Input size**: more than [`PdfLimits::max_input_bytes`] is refused before anything is parsed.
//! - **Object count**: the raw bytes are scanned for `N G obj` headers first, and a file with more
//!   than [`PdfLimits::max_objects`] is refused before parsing; objects unpacked from object
//!   streams are counted as they load (the load stops at the cap), and the loaded document is
//!   checked again.
//! - **Decoded bytes**: no stream is ever decoded without a bound, and the bound is a running
//!   total, not a per-stream one. (1) Before parsing, every `stream` body in the raw bytes is
//!   inflated into a fixed 32 KiB scratch buffer, counting the output against
//!   [`PdfLimits::max_decoded_bytes`]: this covers the cross-reference streams that lopdf decodes
//!   while it reads the file's structure. (2) While loading, a filter sees each object before lopdf
//!   does anything with it and decodes every stream itself with lopdf's bounded decoder, the limit
//!   being what is left of [`PdfLimits::max_decoded_bytes`]; the stream keeps its decoded bytes and
//!   loses its `/Filter`, so lopdf never decodes it again (object streams included). Streams whose
//!   filters lopdf cannot decode (images: DCT, JPX, CCITT, JBIG2) are emptied: text never needs
//!   them. After loading, any stream still carrying a `/Filter` is emptied too, so extraction
//!   decodes nothing. Memory held is thus the input, at most `max_decoded_bytes` of decoded
//!   content, and the parsed objects (at most `max_objects`); decode work is at most about twice
//!   `max_decoded_bytes` (the scan, then the load).
//! - **Text**: each page's content stream is read by a streaming reader (module `text`) that keeps a
//!   bounded operand stack (64 operands, arrays of at most 65 536 elements, 256 saved states),
//!   never the list of all operations (lopdf's `Content::decode` would hold some forty times the
//!   content's size for a content of `q q q ...`). The text of all pages together is at most
//!   [`PdfLimits::max_decoded_bytes`] (a ToUnicode map can turn one code into a long string).
//! - **Encrypted files** are refused ([`PdfError::Encrypted`]) before parsing: the trailer's
//!   `/Encrypt` key is found in the raw bytes (a trailer is never compressed).
//! - **Panics** inside the parser are caught (`catch_unwind`) and become [`PdfError::Malformed`].
//! - **Time**: the work runs on a blocking thread (`spawn_blocking`) and [`read_pdf`] gives up after
//!   [`PdfLimits::timeout`] with [`PdfError::Timeout`]. A thread cannot be killed: the timed-out
//!   thread goes on in the background, but it checks a stop flag between objects and pages and its
//!   work is bounded by the caps above in any case, so it ends.

use std::cell::RefCell;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lopdf::{Document, LoadOptions, Object, ObjectId};

mod text;

/// Bounds on reading one PDF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfLimits {
    /// Largest input accepted, in bytes.
    pub max_input_bytes: usize,
    /// Most bytes all streams of the document may decode to, in all (not per stream).
    pub max_decoded_bytes: usize,
    /// Most objects the document may hold (indirect objects, including those in object streams).
    pub max_objects: usize,
    /// How long [`read_pdf`] waits for the reader before it answers [`PdfError::Timeout`].
    pub timeout: Duration,
}

impl Default for PdfLimits {
    /// 50 MiB input, 256 MiB decoded in all, 500 000 objects, 10 s.
    fn default() -> Self {
        PdfLimits {
            max_input_bytes: 50 * 1024 * 1024,
            max_decoded_bytes: 256 * 1024 * 1024,
            max_objects: 500_000,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A PDF's title and text, page by page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PdfText {
    /// The document information dictionary's `/Title`, when it has a non-empty one.
    pub title: Option<String>,
    /// Pages in the document (`pages.len()`).
    pub page_count: usize,
    /// The text of each page, in order; empty for a page without text (e.g. a scanned image).
    pub pages: Vec<String>,
}

/// Why a PDF could not be read. Display names the limit or the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PdfError {
    /// Over one of the [`PdfLimits`]: `limit` is the field's name, `max` its value.
    TooLarge { limit: &'static str, max: usize },
    /// Not a PDF at all (no `%PDF-` header near the start).
    NotPdf,
    /// A PDF the parser could not read (or that made it panic); the text says what failed.
    Malformed(String),
    /// The document is encrypted; forge does not decrypt PDFs.
    Encrypted,
    /// Reading took longer than [`PdfLimits::timeout`].
    Timeout(Duration),
}

impl fmt::Display for PdfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PdfError::TooLarge { limit, max } => {
                let what = match *limit {
                    "max_input_bytes" => format!("the file is larger than {max} bytes"),
                    "max_decoded_bytes" => {
                        format!("its streams decode to more than {max} bytes in all (a compression bomb, or a very large document)")
                    }
                    "max_objects" => format!("it has more than {max} objects"),
                    _ => format!("it is over {max}"),
                };
                write!(
                    f,
                    "PDF not read: {what}, over the reader's limit {limit}; \
                     a smaller document, or fewer pages of it, can be read"
                )
            }
            PdfError::NotPdf => write!(
                f,
                "not a PDF: the content has no %PDF- header near its start"
            ),
            PdfError::Malformed(why) => write!(f, "PDF not read: the file is damaged ({why})"),
            PdfError::Encrypted => write!(
                f,
                "PDF not read: the document is encrypted (password-protected); forge does not decrypt PDFs"
            ),
            PdfError::Timeout(after) => write!(
                f,
                "PDF not read: reading it took longer than {} s (the reader's timeout)",
                after.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for PdfError {}

/// How far into the file the `%PDF-` header may start (readers accept leading junk; 1024 is the
/// customary allowance).
const HEADER_WINDOW: usize = 1024;

/// Read `bytes` as a PDF: title, page count, text of each page, within `limits` (see the module
/// docs for how each bound holds). Never panics; a broken file is an `Err`.
pub async fn read_pdf(bytes: Vec<u8>, limits: &PdfLimits) -> Result<PdfText, PdfError> {
    if bytes.len() > limits.max_input_bytes {
        return Err(PdfError::TooLarge {
            limit: "max_input_bytes",
            max: limits.max_input_bytes,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let limits_owned = limits.clone();
    let stop_worker = stop.clone();
    let worker =
        tokio::task::spawn_blocking(move || read_pdf_sync(&bytes, &limits_owned, stop_worker));
    match tokio::time::timeout(limits.timeout, worker).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(PdfError::Malformed(format!(
            "the reader thread failed: {join}"
        ))),
        Err(_) => {
            stop.store(true, Ordering::Relaxed);
            Err(PdfError::Timeout(limits.timeout))
        }
    }
}

/// [`read_pdf`] without the thread and the timeout: all bounds but time hold (the `stop` flag,
/// when set, ends the work early with [`PdfError::Timeout`]). Catches panics.
pub fn read_pdf_sync(
    bytes: &[u8],
    limits: &PdfLimits,
    stop: Arc<AtomicBool>,
) -> Result<PdfText, PdfError> {
    if bytes.len() > limits.max_input_bytes {
        return Err(PdfError::TooLarge {
            limit: "max_input_bytes",
            max: limits.max_input_bytes,
        });
    }
    match std::panic::catch_unwind(AssertUnwindSafe(|| read_inner(bytes, limits, &stop))) {
        Ok(result) => result,
        Err(payload) => {
            // The thread-local load state may be left set by the panic; clear it for the next use.
            LOAD.with(|s| *s.borrow_mut() = None);
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(PdfError::Malformed(format!(
                "the parser panicked: {}",
                detail(&what)
            )))
        }
    }
}

fn read_inner(
    bytes: &[u8],
    limits: &PdfLimits,
    stop: &Arc<AtomicBool>,
) -> Result<PdfText, PdfError> {
    let window = &bytes[..bytes.len().min(HEADER_WINDOW)];
    if find(window, b"%PDF-").is_none() {
        return Err(PdfError::NotPdf);
    }
    let scan = prescan(bytes, limits, stop)?;
    if scan.encrypted {
        return Err(PdfError::Encrypted);
    }
    let doc = load(bytes, limits, stop)?;
    if doc.is_encrypted() || doc.trailer.has(b"Encrypt") {
        return Err(PdfError::Encrypted);
    }
    extract(&doc, limits, stop)
}

/// A parser message as a [`PdfError::Malformed`] detail: it may quote bytes of the file, which
/// is outside content, so only plain ASCII punctuation and letters are kept, at most 120 of them.
fn detail(message: &str) -> String {
    message
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || " _:.,()#-".contains(*c))
        .take(120)
        .collect()
}

// ---- the raw scan ---------------------------------------------------------------------------

struct Scan {
    encrypted: bool,
}

/// One pass over the raw bytes: count object headers, find an `/Encrypt` name, and inflate every
/// `stream` body into a scratch buffer counting output against `max_decoded_bytes`.
fn prescan(bytes: &[u8], limits: &PdfLimits, stop: &AtomicBool) -> Result<Scan, PdfError> {
    let mut objects = 0usize;
    let mut encrypted = false;
    let mut decoded = 0usize;
    let mut scratch = vec![0u8; 32 * 1024];
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' => {
                let (name, end) = read_name(bytes, i + 1);
                if name == b"Encrypt" {
                    encrypted = true;
                }
                i = end.max(i + 1);
            }
            b'o' if bytes[i..].starts_with(b"obj") && is_obj_header(bytes, i) => {
                objects += 1;
                if objects > limits.max_objects {
                    return Err(PdfError::TooLarge {
                        limit: "max_objects",
                        max: limits.max_objects,
                    });
                }
                i += 3;
            }
            b's' if bytes[i..].starts_with(b"stream") && is_stream_keyword(bytes, i) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(PdfError::Timeout(limits.timeout));
                }
                let mut body = i + 6;
                if bytes.get(body) == Some(&b'\r') {
                    body += 1;
                }
                if bytes.get(body) == Some(&b'\n') {
                    body += 1;
                }
                let room = limits.max_decoded_bytes - decoded;
                let out = inflate_count(&bytes[body..], room, &mut scratch);
                if out > room {
                    return Err(PdfError::TooLarge {
                        limit: "max_decoded_bytes",
                        max: limits.max_decoded_bytes,
                    });
                }
                decoded += out;
                // Scan on from the body start: a keyword inside compressed bytes is only another
                // candidate, charged the same way.
                i = body;
            }
            _ => i += 1,
        }
    }
    Ok(Scan { encrypted })
}

/// A PDF name starting at `start` (after the `/`), with `#xx` escapes decoded; and where it ends.
fn read_name(bytes: &[u8], start: usize) -> (Vec<u8>, usize) {
    let mut name = Vec::new();
    let mut i = start;
    while i < bytes.len() && name.len() < 128 {
        let b = bytes[i];
        if is_white(b) || is_delim(b) {
            break;
        }
        if b == b'#' {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|c| hex(*c)),
                bytes.get(i + 2).and_then(|c| hex(*c)),
            ) {
                name.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        name.push(b);
        i += 1;
    }
    (name, i)
}

fn is_white(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0')
}

fn is_delim(b: u8) -> bool {
    matches!(
        b,
        b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
    )
}

fn is_regular(b: u8) -> bool {
    !is_white(b) && !is_delim(b)
}

/// `obj` at `i` is a header `N G obj`: whitespace and a digit before it, a non-regular byte after.
fn is_obj_header(bytes: &[u8], i: usize) -> bool {
    let after_ok = bytes.get(i + 3).is_none_or(|b| !is_regular(*b));
    let mut j = i;
    let mut saw_space = false;
    while j > 0 && is_white(bytes[j - 1]) {
        j -= 1;
        saw_space = true;
    }
    after_ok && saw_space && j > 0 && bytes[j - 1].is_ascii_digit()
}

/// `stream` at `i` is the keyword: not the tail of `endstream` or of another word, and followed
/// by an end of line.
fn is_stream_keyword(bytes: &[u8], i: usize) -> bool {
    let before_ok = i == 0 || !is_regular(bytes[i - 1]);
    let after_ok = matches!(bytes.get(i + 6), Some(b'\r' | b'\n'));
    before_ok && after_ok
}

/// How many bytes `input` inflates to (zlib when it starts with a zlib header, raw deflate
/// otherwise), counting at most `room + 1`; output goes to `scratch` and is dropped. Stops at the
/// end of the deflate stream, at the first error, or when no progress is made.
fn inflate_count(input: &[u8], room: usize, scratch: &mut [u8]) -> usize {
    let zlib = input.len() >= 2
        && input[0] & 0x0f == 8
        && (u16::from(input[0]) << 8 | u16::from(input[1])) % 31 == 0;
    let mut d = flate2::Decompress::new(zlib);
    let cap = room.saturating_add(1);
    loop {
        let before_in = d.total_in();
        let before_out = d.total_out();
        let consumed = usize::try_from(before_in).unwrap_or(usize::MAX);
        let Some(rest) = input.get(consumed..) else {
            break;
        };
        let status = d.decompress(rest, scratch, flate2::FlushDecompress::None);
        let produced = d.total_out();
        if usize::try_from(produced).unwrap_or(usize::MAX) >= cap {
            return cap;
        }
        match status {
            Ok(flate2::Status::StreamEnd) | Err(_) => break,
            Ok(_) => {
                if d.total_in() == before_in && produced == before_out {
                    break;
                }
            }
        }
    }
    usize::try_from(d.total_out()).unwrap_or(usize::MAX)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---- the bounded load -----------------------------------------------------------------------

/// What the load filter needs: a fn pointer cannot capture, so it lives in a thread local for the
/// one load running on this thread (lopdf is built without `rayon`, so the load stays here).
struct LoadState {
    room: usize,
    objects: usize,
    max_objects: usize,
    over: Option<PdfError>,
    stop: Arc<AtomicBool>,
}

thread_local! {
    static LOAD: RefCell<Option<LoadState>> = const { RefCell::new(None) };
}

/// Filters lopdf decodes itself; a stream naming only these is decoded (bounded) by the filter.
const DECODABLE: &[&[u8]] = &[
    b"FlateDecode",
    b"LZWDecode",
    b"BrotliDecode",
    b"ASCII85Decode",
    b"ASCIIHexDecode",
    b"RunLengthDecode",
];

/// lopdf's load filter: counts objects and decodes each stream within what is left of the budget.
fn bound_object(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    LOAD.with(|cell| {
        let mut guard = cell.borrow_mut();
        let state = guard.as_mut()?;
        if state.over.is_some() {
            return None;
        }
        if state.stop.load(Ordering::Relaxed) {
            state.over = Some(PdfError::Timeout(Duration::ZERO));
            return None;
        }
        state.objects += 1;
        if state.objects > state.max_objects {
            state.over = Some(PdfError::TooLarge {
                limit: "max_objects",
                max: state.max_objects,
            });
            return None;
        }
        if let Object::Stream(stream) = object {
            if stream.dict.has(b"Filter") {
                let decodable = stream.filters().is_ok_and(|fs| {
                    fs.len() <= lopdf::Stream::MAX_FILTERS
                        && fs.iter().all(|f| DECODABLE.contains(f))
                });
                if !decodable {
                    stream.set_plain_content(Vec::new());
                } else {
                    match stream.decompressed_content_with_limit(state.room) {
                        Ok(plain) => {
                            state.room -= plain.len().min(state.room);
                            stream.set_plain_content(plain);
                        }
                        Err(lopdf::Error::Decompress(
                            lopdf::DecompressError::MemoryLimitExceeded { .. },
                        )) => {
                            state.over = Some(PdfError::TooLarge {
                                limit: "max_decoded_bytes",
                                max: 0,
                            });
                            return None;
                        }
                        // A stream that does not decode holds nothing readable.
                        Err(_) => stream.set_plain_content(Vec::new()),
                    }
                }
            }
        }
        // lopdf uses both what the filter leaves in `object` (top-level objects) and what it
        // returns (objects unpacked from an object stream, which are never streams). So: a
        // non-stream is returned as a copy (small), a stream stays in place and a placeholder is
        // returned, so decoded content is never held twice.
        match object {
            Object::Stream(_) => Some((id, Object::Null)),
            other => Some((id, other.clone())),
        }
    })
}

fn load(bytes: &[u8], limits: &PdfLimits, stop: &Arc<AtomicBool>) -> Result<Document, PdfError> {
    LOAD.with(|cell| {
        *cell.borrow_mut() = Some(LoadState {
            room: limits.max_decoded_bytes,
            objects: 0,
            max_objects: limits.max_objects,
            over: None,
            stop: stop.clone(),
        })
    });
    let options = LoadOptions {
        filter: Some(bound_object),
        max_decompressed_size: Some(limits.max_decoded_bytes),
        ..LoadOptions::default()
    };
    let loaded = Document::load_mem_with_options(bytes, options);
    let state = LOAD.with(|cell| cell.borrow_mut().take());
    if let Some(over) = state.and_then(|s| s.over) {
        return Err(match over {
            PdfError::TooLarge { limit, .. } => PdfError::TooLarge {
                limit,
                max: if limit == "max_objects" {
                    limits.max_objects
                } else {
                    limits.max_decoded_bytes
                },
            },
            PdfError::Timeout(_) => PdfError::Timeout(limits.timeout),
            other => other,
        });
    }
    let mut doc = loaded.map_err(|e| match e {
        lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. }) => {
            PdfError::TooLarge {
                limit: "max_decoded_bytes",
                max: limits.max_decoded_bytes,
            }
        }
        lopdf::Error::Decryption(_) | lopdf::Error::InvalidPassword => PdfError::Encrypted,
        other => PdfError::Malformed(detail(&other.to_string())),
    })?;
    if doc.objects.len() > limits.max_objects {
        return Err(PdfError::TooLarge {
            limit: "max_objects",
            max: limits.max_objects,
        });
    }
    // Whatever reached the document without passing the filter holds no /Filter afterwards either:
    // extraction then never decodes a stream.
    for object in doc.objects.values_mut() {
        if let Object::Stream(stream) = object {
            if stream.dict.has(b"Filter") {
                stream.set_plain_content(Vec::new());
            }
        }
    }
    Ok(doc)
}

// ---- extraction -----------------------------------------------------------------------------

fn extract(doc: &Document, limits: &PdfLimits, stop: &AtomicBool) -> Result<PdfText, PdfError> {
    let pages = doc.get_pages();
    let mut texts = Vec::with_capacity(pages.len().min(limits.max_objects));
    // All pages' text together stays within max_decoded_bytes (a ToUnicode map can turn one
    // code into a long string, so text is not bounded by content size alone).
    let mut room = limits.max_decoded_bytes;
    for &page_id in pages.values() {
        if stop.load(Ordering::Relaxed) {
            return Err(PdfError::Timeout(limits.timeout));
        }
        let text = tidy(&text::page_text(
            doc,
            page_id,
            limits.max_decoded_bytes,
            room,
        ));
        room -= text.len().min(room);
        texts.push(text);
    }
    Ok(PdfText {
        title: title(doc),
        page_count: texts.len(),
        pages: texts,
    })
}

/// Trim each line's ends, drop empty lines at the ends and runs of more than one empty line.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

fn title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let info = match info {
        Object::Reference(id) => doc.get_object(*id).ok()?,
        other => other,
    };
    let dict = info.as_dict().ok()?;
    let t = dict.get(b"Title").ok()?;
    let t = match t {
        Object::Reference(id) => doc.get_object(*id).ok()?,
        other => other,
    };
    let s = lopdf::decode_text_string(t).ok()?;
    let s: String = s.chars().filter(|c| !c.is_control()).collect();
    let s = s.trim();
    (!s.is_empty()).then(|| s.chars().take(500).collect())
}

// ---- what a tool shows ----------------------------------------------------------------------

/// The text a tool shows: `PDF document: <title> (N pages)`, then `--- page K ---` sections from
/// `from_page` (1-based; 0 counts as 1) while they fit `budget_bytes`, then
/// `(pages K..N not shown: read on with page: K)`. A first page larger than the budget is cut
/// (and says so), so the answer is never empty while pages remain.
pub fn render_pdf_text(doc: &PdfText, from_page: usize, budget_bytes: usize) -> String {
    render_pdf_text_next(doc, from_page, budget_bytes).0
}

/// [`render_pdf_text`], and the page to read on from when some were not shown (`None` when the
/// text reaches the last page).
pub fn render_pdf_text_next(
    doc: &PdfText,
    from_page: usize,
    budget_bytes: usize,
) -> (String, Option<usize>) {
    let (mut text, note, next) = render_parts(doc, from_page, budget_bytes);
    if let Some(note) = note {
        text.push_str(&note);
    }
    (text, next)
}

/// The document's text (title line and page sections: outside content) apart from forge's own
/// "read on" line, so a tool can fence the first and not the second; and the next page.
pub(crate) fn render_parts(
    doc: &PdfText,
    from_page: usize,
    budget_bytes: usize,
) -> (String, Option<String>, Option<usize>) {
    let n = doc.page_count.max(doc.pages.len());
    let plural = if n == 1 { "page" } else { "pages" };
    let mut out = match &doc.title {
        Some(t) => format!("PDF document: {t} ({n} {plural})\n"),
        None => format!("PDF document ({n} {plural})\n"),
    };
    let from = from_page.max(1);
    if n == 0 {
        out.push_str("(the document has no pages)\n");
        return (out, None, None);
    }
    if from > n {
        out.push_str(&format!(
            "(page {from} does not exist: the document has {n} {plural}; read from page: 1)\n"
        ));
        return (out, None, None);
    }
    let mut used = out.len();
    let mut next = from;
    for k in from..=n {
        let text = doc.pages.get(k - 1).map(String::as_str).unwrap_or("");
        let body = if text.trim().is_empty() {
            "(no text on this page: it may be an image)"
        } else {
            text
        };
        let section = format!("\n--- page {k} ---\n{body}\n");
        if used + section.len() <= budget_bytes {
            out.push_str(&section);
            used += section.len();
            next = k + 1;
            continue;
        }
        if k == from {
            // Not even the first page fits: show what does, cut on a character boundary.
            let head = format!("\n--- page {k} ---\n");
            let note = format!("\n(page {k} cut at the size budget)\n");
            let room = budget_bytes.saturating_sub(used + head.len() + note.len());
            let mut cut = room.min(body.len());
            while cut > 0 && !body.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&head);
            out.push_str(&body[..cut]);
            out.push_str(&note);
            next = k + 1;
        }
        break;
    }
    if next <= n {
        let range = if next == n {
            format!("page {n}")
        } else {
            format!("pages {next}..{n}")
        };
        let note = format!("\n({range} not shown: read on with page: {next})\n");
        return (out, Some(note), Some(next));
    }
    (out, None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(pages: &[&str]) -> PdfText {
        PdfText {
            title: Some("T".into()),
            page_count: pages.len(),
            pages: pages.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn render_shows_pages_that_fit_and_says_how_to_read_on() {
        let d = doc(&["aaaa", "bbbb", "cccc"]);
        let all = render_pdf_text(&d, 1, 10_000);
        assert!(all.starts_with("PDF document: T (3 pages)\n"), "{all}");
        assert!(all.contains("--- page 1 ---\naaaa") && all.contains("--- page 3 ---\ncccc"));
        assert!(!all.contains("not shown"), "{all}");
        let budget = "PDF document: T (3 pages)\n".len() + "\n--- page 2 ---\nbbbb\n".len();
        let some = render_pdf_text(&d, 2, budget + 5);
        assert!(some.contains("--- page 2 ---\nbbbb"), "{some}");
        assert!(!some.contains("cccc"), "{some}");
        assert!(
            some.contains("(page 3 not shown: read on with page: 3)"),
            "{some}"
        );
        let cut = render_pdf_text(&doc(&["é".repeat(100).as_str(), "x"]), 1, 60);
        assert!(cut.contains("(page 1 cut at the size budget)"), "{cut}");
        assert!(cut.contains("read on with page: 2"), "{cut}");
        let past = render_pdf_text(&d, 9, 1000);
        assert!(past.contains("page 9 does not exist"), "{past}");
    }

    #[test]
    fn names_with_escapes_are_decoded() {
        assert_eq!(read_name(b"Encr#79pt ", 0).0, b"Encrypt");
        assert_eq!(read_name(b"Type/Page", 0).0, b"Type");
    }
}
