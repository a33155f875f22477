//! A YAML tree that remembers where every node came from.
//!
//! serde_norway turns YAML into our typed structs, but its values carry no positions. To point a
//! diagnostic at the offending entry (`capabilities: [browsr]`, an unknown forge.yaml key) we parse
//! the same text a second time with yaml-rust2's marked event parser and keep a small tree of
//! nodes with byte spans. yaml-rust2 markers count characters, so they are converted to byte
//! offsets here; line and column are then computed by miette from the byte span, which keeps them
//! correct for non-ASCII files (icons are often emoji).

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// One node of a marked YAML document. Offsets are byte offsets into the parsed text.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// An alias (`*name`) or an empty document.
    Other,
}

/// A step in a path from the document root.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

impl Node {
    /// The node at `path`, if the document has one there.
    pub(crate) fn get(&self, path: &[Seg<'_>]) -> Option<&Node> {
        let mut cur = self;
        for seg in path {
            cur = match (seg, &cur.kind) {
                (Seg::Key(k), Kind::Map(entries)) => entries
                    .iter()
                    .find(|(key, _)| matches!(&key.kind, Kind::Scalar(s) if s == k))
                    .map(|(_, v)| v)?,
                (Seg::Index(i), Kind::Seq(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The key node of the last `Seg::Key` in `path` (for "unknown key" style diagnostics).
    #[cfg(test)]
    pub(crate) fn key_node(&self, path: &[Seg<'_>]) -> Option<&Node> {
        let (last, parent) = path.split_last()?;
        let Seg::Key(k) = last else { return None };
        match &self.get(parent)?.kind {
            Kind::Map(entries) => entries
                .iter()
                .find(|(key, _)| matches!(&key.kind, Kind::Scalar(s) if s == k))
                .map(|(key, _)| key),
            _ => None,
        }
    }

    /// Keys of a mapping node with their nodes, in document order.
    pub(crate) fn map_keys(&self) -> Vec<(&str, &Node)> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .filter_map(|(k, _)| match &k.kind {
                    Kind::Scalar(s) => Some((s.as_str(), k)),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn span(&self) -> (usize, usize) {
        (self.start, self.end.max(self.start))
    }
}

/// A YAML syntax error with its byte offset.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub offset: usize,
    pub message: String,
}

/// Parse `text` into a marked tree. An empty document gives a `Kind::Other` root.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    let offsets = CharOffsets::new(text);
    let mut builder = Builder {
        text,
        offsets: &offsets,
        stack: Vec::new(),
        root: None,
    };
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, false) {
        return Err(SyntaxError {
            offset: offsets.byte(e.marker().index()),
            message: e.info().to_string(),
        });
    }
    Ok(builder.root.unwrap_or(Node {
        kind: Kind::Other,
        start: 0,
        end: 0,
    }))
}

/// Maps yaml-rust2's character indices to byte offsets.
struct CharOffsets {
    bytes: Vec<usize>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        Self {
            bytes: text.char_indices().map(|(b, _)| b).collect(),
            len: text.len(),
        }
    }
    fn byte(&self, char_index: usize) -> usize {
        self.bytes.get(char_index).copied().unwrap_or(self.len)
    }
}

enum Open {
    Seq(usize, Vec<Node>),
    Map(usize, Vec<Node>),
}

struct Builder<'a> {
    text: &'a str,
    offsets: &'a CharOffsets,
    stack: Vec<Open>,
    root: Option<Node>,
}

impl Builder<'_> {
    fn push(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Open::Seq(_, items)) | Some(Open::Map(_, items)) => items.push(node),
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
        }
    }

    /// End of a scalar that starts at `start`: the closing quote for quoted scalars, the end of
    /// the value on its line for plain ones (block scalars span to the end of their first line).
    fn scalar_end(&self, start: usize, value: &str, style: TScalarStyle) -> usize {
        let rest = &self.text[start.min(self.text.len())..];
        let line_end = rest.find('\n').unwrap_or(rest.len());
        let line = &rest[..line_end];
        let end = match style {
            TScalarStyle::SingleQuoted | TScalarStyle::DoubleQuoted => {
                let q = if matches!(style, TScalarStyle::SingleQuoted) {
                    '\''
                } else {
                    '"'
                };
                line.char_indices()
                    .skip(1)
                    .find(|&(_, c)| c == q)
                    .map(|(i, _)| i + 1)
                    .unwrap_or(line.len())
            }
            TScalarStyle::Plain => {
                let first_line = value.lines().next().unwrap_or("");
                if line.starts_with(first_line) {
                    first_line.len()
                } else {
                    line.len()
                }
            }
            _ => line.len(),
        };
        start + end
    }
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let at = self.offsets.byte(mark.index());
        match ev {
            Event::Scalar(value, style, _, _) => {
                let end = self.scalar_end(at, &value, style);
                self.push(Node {
                    kind: Kind::Scalar(value),
                    start: at,
                    end,
                });
            }
            Event::Alias(_) => {
                let end = self.scalar_end(at, "", TScalarStyle::Plain);
                self.push(Node {
                    kind: Kind::Other,
                    start: at,
                    end,
                })
            }
            Event::SequenceStart(..) => self.stack.push(Open::Seq(at, Vec::new())),
            Event::MappingStart(..) => self.stack.push(Open::Map(at, Vec::new())),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Open::Seq(start, items)) => Node {
                        end: items.last().map(|n| n.end).unwrap_or(at).max(start),
                        kind: Kind::Seq(items),
                        start,
                    },
                    Some(Open::Map(start, items)) => {
                        let end = items.last().map(|n| n.end).unwrap_or(at).max(start);
                        let mut pairs = Vec::with_capacity(items.len() / 2);
                        let mut it = items.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            pairs.push((k, v));
                        }
                        Node {
                            kind: Kind::Map(pairs),
                            start,
                            end,
                        }
                    }
                    None => return,
                };
                self.push(node);
            }
            _ => {}
        }
    }
}

/// A YAML document inside a file (all of forge.yaml, or a SKILL.md front matter), with what is
/// needed to turn problems into [`SourceDiagnostic`]s pointing into the whole file.
pub(crate) struct Doc<'a> {
    pub path: &'a std::path::Path,
    pub src: std::sync::Arc<miette::NamedSource<String>>,
    /// Byte offset of the YAML text in the file.
    pub base: usize,
    pub yaml: &'a str,
    pub tree: Node,
}

impl<'a> Doc<'a> {
    /// Parse the marked tree; a syntax error becomes a diagnostic.
    pub(crate) fn new(
        path: &'a std::path::Path,
        src: std::sync::Arc<miette::NamedSource<String>>,
        base: usize,
        yaml: &'a str,
    ) -> Result<Self, Box<crate::SourceDiagnostic>> {
        match parse(yaml) {
            Ok(tree) => Ok(Self {
                path,
                src,
                base,
                yaml,
                tree,
            }),
            Err(e) => {
                let at = base + e.offset;
                Err(Box::new(crate::SourceDiagnostic::new(
                    path,
                    &src,
                    "forge::yaml::syntax",
                    format!("invalid YAML: {}", e.message),
                    (at, at + 1),
                    "here",
                    Some(
                        "fix the YAML syntax (indentation, quotes, brackets) at this point".into(),
                    ),
                )))
            }
        }
    }

    /// File byte span of `node`.
    pub(crate) fn span_of(&self, node: &Node) -> (usize, usize) {
        let (s, e) = node.span();
        (self.base + s, self.base + e)
    }

    /// A diagnostic at the node found at `at` (or, failing that, at `fallback`, or the document).
    pub(crate) fn diag(
        &self,
        code: &'static str,
        message: impl Into<String>,
        at: &[Seg<'_>],
        label: impl Into<String>,
        help: Option<String>,
    ) -> crate::SourceDiagnostic {
        let span = self.locate(at);
        crate::SourceDiagnostic::new(self.path, &self.src, code, message, span, label, help)
    }

    /// Like [`Doc::diag`], narrowed to the first occurrence of `needle` inside the node (for one
    /// entry of a comma-separated scalar).
    pub(crate) fn diag_within(
        &self,
        code: &'static str,
        message: impl Into<String>,
        at: &[Seg<'_>],
        needle: &str,
        label: impl Into<String>,
        help: Option<String>,
    ) -> crate::SourceDiagnostic {
        let (start, end) = self.locate(at);
        let full = self.src.inner();
        let span = full
            .get(start..end)
            .and_then(|t| t.find(needle))
            .map(|i| (start + i, start + i + needle.len()))
            .unwrap_or((start, end));
        crate::SourceDiagnostic::new(self.path, &self.src, code, message, span, label, help)
    }

    /// Span of the deepest existing node along `at`.
    pub(crate) fn locate(&self, at: &[Seg<'_>]) -> (usize, usize) {
        for n in (0..=at.len()).rev() {
            if let Some(node) = self.tree.get(&at[..n]) {
                if n == 0 {
                    // Whole document: point at its first line only.
                    let first = self.yaml.find('\n').unwrap_or(self.yaml.len());
                    return (self.base, self.base + first);
                }
                return self.span_of(node);
            }
        }
        (self.base, self.base)
    }

    /// A diagnostic for a key node (e.g. an unknown key).
    pub(crate) fn key_diag(
        &self,
        code: &'static str,
        message: impl Into<String>,
        key: &Node,
        label: impl Into<String>,
        help: Option<String>,
    ) -> crate::SourceDiagnostic {
        crate::SourceDiagnostic::new(
            self.path,
            &self.src,
            code,
            message,
            self.span_of(key),
            label,
            help,
        )
    }

    /// Turn a serde_norway error into a diagnostic at the location it reports.
    pub(crate) fn serde_error(
        &self,
        err: &serde_norway::Error,
        what: &str,
    ) -> crate::SourceDiagnostic {
        let raw = err.to_string();
        let message = friendly(&strip_location(&raw));
        let (start, end) = match err.location() {
            Some(loc) => {
                let at = offset_of_line_col(self.yaml, loc.line(), loc.column());
                let rest = &self.yaml[at..];
                let len = rest
                    .find(['\n', ','])
                    .unwrap_or(rest.len())
                    .max(1)
                    .min(rest.len());
                (self.base + at, self.base + at + len)
            }
            None => self.locate(&[]),
        };
        let (field, detail) = match message.split_once(": ") {
            Some((f, d)) if !f.contains(' ') => (Some(f.to_string()), d.to_string()),
            _ => (None, message.clone()),
        };
        let label = detail.clone();
        let help = match &field {
            Some(f) => format!("fix the value of `{f}`; see docs/skills.md for the {what} format"),
            None => format!("see docs/skills.md for the {what} format"),
        };
        crate::SourceDiagnostic::new(
            self.path,
            &self.src,
            "forge::yaml::invalid",
            match field {
                Some(f) => format!("invalid {what}: `{f}`: {detail}"),
                None => format!("invalid {what}: {detail}"),
            },
            (start, end),
            label,
            Some(help),
        )
    }
}

/// Replace serde wording that names our internal types with what the user should write.
fn friendly(msg: &str) -> String {
    msg.replace(
        "data did not match any variant of untagged enum RawBin",
        "expected a binary name (`- jq`) or a mapping with `name` (`- {name: jq, apt: jq}`)",
    )
    .replace("expected u64", "expected a whole number")
}

fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => msg[..i].to_string(),
        _ => msg.to_string(),
    }
}

/// Byte offset of 1-based `line` and 1-based `column` (characters) in `text`.
fn offset_of_line_col(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let col = column.saturating_sub(1);
            return off + l.char_indices().nth(col).map(|(b, _)| b).unwrap_or(l.len());
        }
        off += l.len();
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_values_with_non_ascii_before_them() {
        let text = "icon: 🌐\nrequires:\n  capabilities: [browser, browsr]\n";
        let root = parse(text).unwrap();
        let node = root
            .get(&[
                Seg::Key("requires"),
                Seg::Key("capabilities"),
                Seg::Index(1),
            ])
            .unwrap();
        assert_eq!(&text[node.start..node.end], "browsr");
        let key = root.key_node(&[Seg::Key("requires")]).unwrap();
        assert_eq!(&text[key.start..key.end], "requires");
    }

    #[test]
    fn quoted_scalars_span_their_quotes() {
        let text = "a:\n  - \"x y\"\n  - 'z'\n";
        let root = parse(text).unwrap();
        let n = root.get(&[Seg::Key("a"), Seg::Index(0)]).unwrap();
        assert_eq!(&text[n.start..n.end], "\"x y\"");
        let n = root.get(&[Seg::Key("a"), Seg::Index(1)]).unwrap();
        assert_eq!(&text[n.start..n.end], "'z'");
    }

    #[test]
    fn syntax_error_has_offset() {
        let err = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(err.offset > 0, "{err:?}");
    }
}
