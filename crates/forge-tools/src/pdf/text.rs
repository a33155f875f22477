//! The text of one page: a streaming reader of its content stream that keeps a bounded operand
//! stack (never the whole list of operations, which for a content of `q q q ...` would take some
//! forty times the content's size), follows the text and graphics matrices, and places a line
//! break where the baseline moves and a space where a gap opens between two runs on one line.
//! Characters are decoded with lopdf's font encodings (ToUnicode maps included); advances come
//! from the font's `/Widths` or `/W`.

use std::collections::{BTreeMap, HashMap};

use lopdf::{Dictionary, Document, Encoding, Object, ObjectId};

/// Most operands kept before an operator; more is garbage, and the oldest are dropped.
const MAX_OPERANDS: usize = 64;
/// Most elements kept in one array operand (a `TJ` array); later ones are dropped.
const MAX_ARRAY: usize = 65_536;
/// Deepest `q` nesting followed; deeper saves are ignored.
const MAX_SAVE_DEPTH: usize = 256;

type Matrix = [f64; 6];
const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

/// `a` then `b` (PDF row-vector convention: a point is multiplied by `a`, then by `b`).
fn mul(a: &Matrix, b: &Matrix) -> Matrix {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    ]
}

fn translate(tx: f64, ty: f64, m: &Matrix) -> Matrix {
    mul(&[1.0, 0.0, 0.0, 1.0, tx, ty], m)
}

/// An operand as the reader keeps it.
#[derive(Debug, Clone)]
enum Operand {
    Num(f64),
    Str(Vec<u8>),
    Name(Vec<u8>),
    Array(Vec<Operand>),
    Other,
}

impl Operand {
    fn num(&self) -> Option<f64> {
        match self {
            Operand::Num(n) if n.is_finite() => Some(*n),
            _ => None,
        }
    }
}

/// What a page's font gives the reader.
struct Font<'a> {
    encoding: Option<Encoding<'a>>,
    /// Two bytes per character code (a Type0 font), else one.
    two_byte: bool,
    /// Advance widths in thousandths of text space unit, by code: `(start, end) -> width`.
    widths: BTreeMap<u32, (u32, f64)>,
    missing_width: f64,
}

impl Font<'_> {
    fn width(&self, code: u32) -> f64 {
        match self.widths.range(..=code).next_back() {
            Some((_, (end, w))) if code <= *end => *w,
            _ => self.missing_width,
        }
    }
}

fn deref<'a>(doc: &'a Document, o: &'a Object) -> &'a Object {
    match o {
        Object::Reference(id) => doc.get_object(*id).unwrap_or(o),
        _ => o,
    }
}

fn num(o: &Object) -> Option<f64> {
    match o {
        Object::Integer(i) => Some(*i as f64),
        Object::Real(r) if r.is_finite() => Some(f64::from(*r)),
        _ => None,
    }
}

fn load_font<'a>(doc: &'a Document, dict: &'a Dictionary, limit: usize) -> Font<'a> {
    let encoding = dict.get_font_encoding_with_limit(doc, limit).ok();
    let two_byte = dict
        .get(b"Subtype")
        .and_then(Object::as_name)
        .is_ok_and(|s| s == b"Type0");
    let mut widths = BTreeMap::new();
    let mut missing_width = 500.0;
    if two_byte {
        missing_width = 1000.0;
        let descendant = dict
            .get(b"DescendantFonts")
            .map(|o| deref(doc, o))
            .ok()
            .and_then(|o| o.as_array().ok())
            .and_then(|a| a.first())
            .map(|o| deref(doc, o))
            .and_then(|o| o.as_dict().ok());
        if let Some(d) = descendant {
            if let Some(dw) = d.get(b"DW").ok().and_then(num) {
                missing_width = dw;
            }
            if let Ok(w) = d
                .get(b"W")
                .map(|o| deref(doc, o))
                .and_then(Object::as_array)
            {
                // [c [w1 w2 ...]] or [c_first c_last w]
                let mut i = 0;
                while i < w.len() && widths.len() < MAX_ARRAY {
                    let Some(first) = num(deref(doc, &w[i])) else {
                        break;
                    };
                    let first = first.clamp(0.0, f64::from(u32::MAX)) as u32;
                    match w.get(i + 1).map(|o| deref(doc, o)) {
                        Some(Object::Array(ws)) => {
                            for (k, wo) in ws.iter().take(MAX_ARRAY).enumerate() {
                                if let Some(wv) = num(deref(doc, wo)) {
                                    let c = first.saturating_add(k as u32);
                                    widths.insert(c, (c, wv));
                                }
                            }
                            i += 2;
                        }
                        Some(o) => {
                            let last = num(o).unwrap_or(0.0).clamp(0.0, f64::from(u32::MAX)) as u32;
                            if let Some(wv) = w.get(i + 2).and_then(|o| num(deref(doc, o))) {
                                widths.insert(first, (last.max(first), wv));
                            }
                            i += 3;
                        }
                        None => break,
                    }
                }
            }
        }
    } else {
        let first = dict
            .get(b"FirstChar")
            .ok()
            .and_then(num)
            .unwrap_or(0.0)
            .clamp(0.0, 255.0) as u32;
        if let Ok(ws) = dict
            .get(b"Widths")
            .map(|o| deref(doc, o))
            .and_then(Object::as_array)
        {
            for (k, wo) in ws.iter().take(256).enumerate() {
                if let Some(wv) = num(deref(doc, wo)) {
                    let c = first + k as u32;
                    widths.insert(c, (c, wv));
                }
            }
        }
        if let Some(mw) = dict
            .get(b"FontDescriptor")
            .map(|o| deref(doc, o))
            .and_then(Object::as_dict)
            .ok()
            .and_then(|d| d.get(b"MissingWidth").ok())
            .and_then(num)
        {
            missing_width = mw;
        }
    }
    Font {
        encoding,
        two_byte,
        widths,
        missing_width,
    }
}

/// Reading state for one page.
struct Reader<'a> {
    fonts: BTreeMap<Vec<u8>, &'a Dictionary>,
    loaded: HashMap<Vec<u8>, Font<'a>>,
    doc: &'a Document,
    limit: usize,
    ctm: Matrix,
    saved: Vec<Matrix>,
    tm: Matrix,
    tlm: Matrix,
    font: Option<Vec<u8>>,
    size: f64,
    char_spacing: f64,
    word_spacing: f64,
    scale: f64,
    leading: f64,
    /// Where the last run ended (device space) and its font size there.
    last: Option<(f64, f64, f64)>,
    out: String,
    /// Most bytes of text this page may add.
    budget: usize,
}

impl<'a> Reader<'a> {
    fn show(&mut self, bytes: &[u8]) {
        if self.out.len() >= self.budget {
            return;
        }
        let Some(name) = self.font.clone() else {
            return;
        };
        if !self.loaded.contains_key(&name) {
            let Some(dict) = self.fonts.get(&name).copied() else {
                return;
            };
            let font = load_font(self.doc, dict, self.limit);
            self.loaded.insert(name.clone(), font);
        }
        let Some(font) = self.loaded.get(&name) else {
            return;
        };
        let text = font
            .encoding
            .as_ref()
            .and_then(|e| Document::decode_text(e, bytes).ok())
            .unwrap_or_default();
        let text: String = text
            .chars()
            .map(|c| if c == '\u{a0}' { ' ' } else { c })
            .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
            .collect();

        let trm = mul(&self.tm, &self.ctm);
        let (x, y) = (trm[4], trm[5]);
        // The font size on the page: the text space's vertical unit times the size.
        let size = (self.size * (trm[2] * trm[2] + trm[3] * trm[3]).sqrt()).abs();
        if !text.trim().is_empty() {
            if let Some((lx, ly, lsize)) = self.last {
                let unit = size.max(lsize).max(0.01);
                if (y - ly).abs() > 0.5 * unit {
                    if !self.out.ends_with('\n') {
                        self.out.push('\n');
                    }
                } else if x - lx > 0.15 * unit
                    && !self.out.ends_with([' ', '\n'])
                    && !text.starts_with(' ')
                {
                    self.out.push(' ');
                }
            }
            let room = self.budget.saturating_sub(self.out.len());
            if text.len() <= room {
                self.out.push_str(&text);
            } else {
                let mut cut = room;
                while cut > 0 && !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                self.out.push_str(&text[..cut]);
            }
        }

        // Advance the text matrix by the run's width.
        let step = if font.two_byte { 2 } else { 1 };
        let mut advance = 0.0;
        for code in bytes.chunks(step) {
            let c = code.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
            let w = font.width(c) / 1000.0;
            let space = if step == 1 && c == 32 {
                self.word_spacing
            } else {
                0.0
            };
            advance += (w * self.size + self.char_spacing + space) * self.scale;
        }
        if advance.is_finite() {
            self.tm = translate(advance, 0.0, &self.tm);
        }
        if !text.trim().is_empty() {
            let end = mul(&self.tm, &self.ctm);
            self.last = Some((end[4], end[5], size));
        }
    }

    fn next_line(&mut self, tx: f64, ty: f64) {
        self.tlm = translate(tx, ty, &self.tlm);
        self.tm = self.tlm;
    }

    fn op(&mut self, op: &[u8], args: &mut Vec<Operand>) {
        let n = |k: usize| -> Option<f64> {
            let len = args.len();
            len.checked_sub(k)
                .and_then(|i| args.get(i))
                .and_then(Operand::num)
        };
        match op {
            b"q" if self.saved.len() < MAX_SAVE_DEPTH => self.saved.push(self.ctm),
            b"Q" => {
                if let Some(m) = self.saved.pop() {
                    self.ctm = m;
                }
            }
            b"cm" => {
                if let (Some(a), Some(b), Some(c), Some(d), Some(e), Some(f)) =
                    (n(6), n(5), n(4), n(3), n(2), n(1))
                {
                    self.ctm = mul(&[a, b, c, d, e, f], &self.ctm);
                }
            }
            b"BT" => {
                self.tm = IDENTITY;
                self.tlm = IDENTITY;
            }
            b"Tf" => {
                let len = args.len();
                if let (Some(Operand::Name(name)), Some(size)) =
                    (len.checked_sub(2).and_then(|i| args.get(i)), n(1))
                {
                    self.font = Some(name.clone());
                    self.size = size;
                }
            }
            b"Tc" => self.char_spacing = n(1).unwrap_or(0.0),
            b"Tw" => self.word_spacing = n(1).unwrap_or(0.0),
            b"Tz" => self.scale = n(1).unwrap_or(100.0) / 100.0,
            b"TL" => self.leading = n(1).unwrap_or(0.0),
            b"Td" => {
                if let (Some(tx), Some(ty)) = (n(2), n(1)) {
                    self.next_line(tx, ty);
                }
            }
            b"TD" => {
                if let (Some(tx), Some(ty)) = (n(2), n(1)) {
                    self.leading = -ty;
                    self.next_line(tx, ty);
                }
            }
            b"Tm" => {
                if let (Some(a), Some(b), Some(c), Some(d), Some(e), Some(f)) =
                    (n(6), n(5), n(4), n(3), n(2), n(1))
                {
                    self.tm = [a, b, c, d, e, f];
                    self.tlm = self.tm;
                }
            }
            b"T*" => self.next_line(0.0, -self.leading),
            b"Tj" => {
                if let Some(Operand::Str(s)) = args.last() {
                    let s = s.clone();
                    self.show(&s);
                }
            }
            b"'" | b"\"" => {
                if op == b"\"" {
                    self.word_spacing = n(3).unwrap_or(self.word_spacing);
                    self.char_spacing = n(2).unwrap_or(self.char_spacing);
                }
                self.next_line(0.0, -self.leading);
                if let Some(Operand::Str(s)) = args.last() {
                    let s = s.clone();
                    self.show(&s);
                }
            }
            b"TJ" => {
                if let Some(Operand::Array(items)) = args.pop() {
                    for item in items {
                        match item {
                            Operand::Str(s) => self.show(&s),
                            Operand::Num(adj) if adj.is_finite() => {
                                let tx = -adj / 1000.0 * self.size * self.scale;
                                self.tm = translate(tx, 0.0, &self.tm);
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
        args.clear();
    }
}

/// The text of the page `page_id`, at most `budget` bytes of it. `limit` bounds any decode a
/// font's encoding asks for (none in practice: the reader's streams are decoded at load).
pub(super) fn page_text(doc: &Document, page_id: ObjectId, limit: usize, budget: usize) -> String {
    let fonts = doc.get_page_fonts(page_id).unwrap_or_default();
    let content = doc
        .get_page_content_with_limit(page_id, limit)
        .unwrap_or_default();
    let mut reader = Reader {
        fonts,
        loaded: HashMap::new(),
        doc,
        limit,
        ctm: IDENTITY,
        saved: Vec::new(),
        tm: IDENTITY,
        tlm: IDENTITY,
        font: None,
        size: 0.0,
        char_spacing: 0.0,
        word_spacing: 0.0,
        scale: 1.0,
        leading: 0.0,
        last: None,
        out: String::new(),
        budget,
    };
    let mut lexer = Lexer { b: &content, i: 0 };
    let mut args: Vec<Operand> = Vec::new();
    // Array and dictionary nesting of the operand being read.
    let mut arrays: Vec<Vec<Operand>> = Vec::new();
    let mut dict_depth = 0usize;
    while let Some(tok) = lexer.next() {
        if reader.out.len() >= budget {
            break;
        }
        let operand = match tok {
            Tok::DictOpen => {
                dict_depth += 1;
                continue;
            }
            Tok::DictClose => {
                if dict_depth > 0 {
                    dict_depth -= 1;
                    if dict_depth == 0 {
                        Operand::Other
                    } else {
                        continue;
                    }
                } else {
                    continue;
                }
            }
            _ if dict_depth > 0 => continue,
            Tok::ArrOpen => {
                if arrays.len() < 32 {
                    arrays.push(Vec::new());
                }
                continue;
            }
            Tok::ArrClose => match arrays.pop() {
                Some(items) => Operand::Array(items),
                None => continue,
            },
            Tok::Num(v) => Operand::Num(v),
            Tok::Str(s) => Operand::Str(s),
            Tok::Name(n) => Operand::Name(n.to_vec()),
            Tok::Op(op) => {
                if !arrays.is_empty() {
                    // An operator inside an array: the array was never closed; drop it.
                    arrays.clear();
                }
                if op == b"BI" {
                    lexer.skip_inline_image();
                    args.clear();
                    continue;
                }
                reader.op(op, &mut args);
                continue;
            }
        };
        if let Some(top) = arrays.last_mut() {
            if top.len() < MAX_ARRAY {
                top.push(operand);
            }
        } else {
            if args.len() >= MAX_OPERANDS {
                args.remove(0);
            }
            args.push(operand);
        }
    }
    reader.out
}

enum Tok<'a> {
    Num(f64),
    Str(Vec<u8>),
    Name(&'a [u8]),
    ArrOpen,
    ArrClose,
    DictOpen,
    DictClose,
    Op(&'a [u8]),
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

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    fn regular(&mut self) -> &'a [u8] {
        let start = self.i;
        while self.i < self.b.len() && !is_white(self.b[self.i]) && !is_delim(self.b[self.i]) {
            self.i += 1;
        }
        &self.b[start..self.i]
    }

    fn next(&mut self) -> Option<Tok<'a>> {
        loop {
            let c = *self.b.get(self.i)?;
            if is_white(c) {
                self.i += 1;
                continue;
            }
            if c == b'%' {
                while self.i < self.b.len() && !matches!(self.b[self.i], b'\r' | b'\n') {
                    self.i += 1;
                }
                continue;
            }
            return Some(match c {
                b'(' => {
                    self.i += 1;
                    Tok::Str(self.literal())
                }
                b'<' if self.b.get(self.i + 1) == Some(&b'<') => {
                    self.i += 2;
                    Tok::DictOpen
                }
                b'>' if self.b.get(self.i + 1) == Some(&b'>') => {
                    self.i += 2;
                    Tok::DictClose
                }
                b'<' => {
                    self.i += 1;
                    Tok::Str(self.hex())
                }
                b'[' => {
                    self.i += 1;
                    Tok::ArrOpen
                }
                b']' => {
                    self.i += 1;
                    Tok::ArrClose
                }
                b'/' => {
                    self.i += 1;
                    Tok::Name(self.regular())
                }
                b'>' | b')' | b'{' | b'}' => {
                    self.i += 1;
                    continue;
                }
                _ => {
                    let word = self.regular();
                    if word.is_empty() {
                        self.i += 1;
                        continue;
                    }
                    if matches!(word[0], b'0'..=b'9' | b'+' | b'-' | b'.') {
                        match std::str::from_utf8(word)
                            .ok()
                            .and_then(|s| s.parse::<f64>().ok())
                        {
                            Some(v) => Tok::Num(v),
                            None => Tok::Num(0.0),
                        }
                    } else {
                        Tok::Op(word)
                    }
                }
            });
        }
    }

    /// A literal string after its `(`: balanced parentheses, backslash escapes.
    fn literal(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut depth = 1usize;
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'(' => {
                    depth += 1;
                    out.push(c);
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                    out.push(c);
                }
                b'\\' => {
                    let Some(&e) = self.b.get(self.i) else { break };
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'\r' => {
                            if self.b.get(self.i) == Some(&b'\n') {
                                self.i += 1;
                            }
                        }
                        b'\n' => {}
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.b.get(self.i) {
                                    Some(&d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            out.push((v & 0xff) as u8);
                        }
                        other => out.push(other),
                    }
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// A hex string after its `<`.
    fn hex(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut high: Option<u8> = None;
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            if c == b'>' {
                break;
            }
            let Some(v) = (c as char).to_digit(16) else {
                continue;
            };
            let v = v as u8;
            match high.take() {
                Some(h) => out.push(h << 4 | v),
                None => high = Some(v),
            }
        }
        if let Some(h) = high {
            out.push(h << 4);
        }
        out
    }

    /// After `BI`: skip the image's parameters and data, through `EI`.
    fn skip_inline_image(&mut self) {
        // Parameters up to `ID`.
        while let Some(tok) = self.next() {
            if let Tok::Op(b"ID") = tok {
                break;
            }
        }
        self.i += 1; // the single white-space byte after ID
                     // Data up to `EI` standing alone.
        while self.i + 1 < self.b.len() {
            if self.b[self.i] == b'E'
                && self.b[self.i + 1] == b'I'
                && self.i > 0
                && is_white(self.b[self.i - 1])
                && self.b.get(self.i + 2).is_none_or(|c| is_white(*c))
            {
                self.i += 2;
                return;
            }
            self.i += 1;
        }
        self.i = self.b.len();
    }
}
