//! A small HTML-to-readable-text converter for `web_fetch`: drops scripts, styles and other
//! non-content elements, turns block elements into line breaks, headings and list items into
//! markdown-ish prefixes, links into `text (url)`, and decodes common entities. It never executes
//! anything and is linear in the input size.

/// Elements whose content is never text for a reader.
const SKIP: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas",
];
/// Elements that start a new line.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "aside",
    "nav",
    "br",
    "hr",
    "tr",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "form",
    "fieldset",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "details",
    "summary",
    "address",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "title",
    "label",
    "option",
];

/// Convert `html` to readable text. The `<title>` is returned separately.
pub fn html_to_text(html: &str) -> (Option<String>, String) {
    let mut out = String::with_capacity(html.len() / 3);
    let mut title: Option<String> = None;
    let mut in_title = false;
    let mut title_buf = String::new();
    let mut pending_href: Vec<Option<String>> = Vec::new();
    let bytes = html.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'<' {
            // Comments and doctype.
            if html[i..].starts_with("<!--") {
                i = html[i + 4..]
                    .find("-->")
                    .map(|e| i + 4 + e + 3)
                    .unwrap_or(bytes.len());
                continue;
            }
            let end = match html[i..].find('>') {
                Some(e) => i + e,
                None => break,
            };
            let tag = &html[i + 1..end];
            i = end + 1;
            if tag.starts_with('!') || tag.starts_with('?') {
                continue;
            }
            let closing = tag.starts_with('/');
            let tag_body = tag.trim_start_matches('/');
            let name: String = tag_body
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_lowercase();
            if name.is_empty() {
                continue;
            }
            if SKIP.contains(&name.as_str()) && !closing && !tag_body.ends_with('/') {
                // Raw-text and non-content elements: jump past the matching close tag (or to the end).
                let close = format!("</{name}");
                i = find_ci(&html[i..], &close)
                    .and_then(|at| html[i + at..].find('>').map(|gt| i + at + gt + 1))
                    .unwrap_or(bytes.len());
                continue;
            }
            if name == "title" {
                in_title = !closing;
                if closing && title.is_none() {
                    let t = collapse(&title_buf);
                    if !t.is_empty() {
                        title = Some(t);
                    }
                }
                continue;
            }
            if BLOCK.contains(&name.as_str()) {
                newline(&mut out);
                if !closing {
                    match name.as_str() {
                        "h1" => out.push_str("# "),
                        "h2" => out.push_str("## "),
                        "h3" => out.push_str("### "),
                        "h4" | "h5" | "h6" => out.push_str("#### "),
                        "li" => out.push_str("- "),
                        _ => {}
                    }
                }
            } else if name == "a" {
                if closing {
                    if let Some(Some(href)) = pending_href.pop() {
                        out.push_str(&format!(" ({href})"));
                    }
                } else {
                    pending_href
                        .push(attr(tag_body, "href").filter(|h| !h.starts_with("javascript:")));
                }
            } else if name == "img" {
                if let Some(alt) = attr(tag_body, "alt").filter(|a| !a.trim().is_empty()) {
                    out.push_str(&format!("[image: {}]", alt.trim()));
                }
            } else if matches!(name.as_str(), "td" | "th") && !closing {
                out.push_str(" | ");
            }
            continue;
        }
        let next = html[i..].find('<').map(|e| i + e).unwrap_or(bytes.len());
        let text = decode_entities(&html[i..next]);
        i = next;
        if in_title {
            title_buf.push_str(&text);
            continue;
        }
        push_text(&mut out, &text);
    }
    // Tidy: trim lines, no more than one blank line in a row.
    let mut tidy = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        let l = line.trim();
        if l.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        tidy.push_str(l);
        tidy.push('\n');
    }
    (title, tidy.trim().to_string())
}

/// Byte offset of the first ASCII-case-insensitive occurrence of `needle` (ASCII) in `hay`.
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.as_bytes();
    hay.as_bytes()
        .windows(n.len())
        .position(|w| w.eq_ignore_ascii_case(n))
}

fn newline(out: &mut String) {
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
}

fn push_text(out: &mut String, text: &str) {
    let mut last_space = out.ends_with(' ') || out.ends_with('\n') || out.is_empty();
    for c in text.chars() {
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
                last_space = true;
            }
        } else {
            out.push(c);
            last_space = false;
        }
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The value of attribute `name` in a tag body like `a href="x" class=y`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(name) {
        let at = from + pos;
        from = at + name.len();
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = lower[at + name.len()..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let start = tag.len() - rest.len() + 1;
        let v = tag[start..].trim_start();
        let value = match v.chars().next() {
            Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or(""),
            _ => v
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        return Some(decode_entities(value));
    }
    None
}

/// Decode the common named entities and numeric character references.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let semi = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|b| *b == b';');
        let decoded = semi.and_then(|e| {
            let ent = &rest[1..e];
            let c = match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                "mdash" => Some('—'),
                "ndash" => Some('–'),
                "hellip" => Some('…'),
                "copy" => Some('©'),
                _ if ent.starts_with("#x") || ent.starts_with("#X") => {
                    u32::from_str_radix(&ent[2..], 16)
                        .ok()
                        .and_then(char::from_u32)
                }
                _ if ent.starts_with('#') => ent[1..].parse::<u32>().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_text() {
        let html = r#"<!doctype html><html><head><title> Shelf  finder </title>
            <style>body{color:red}</style><script>alert("x<y")</script></head>
            <body><h1>Books &amp; more</h1><p>Find a <a href="/s?q=1">book</a>.</p>
            <!-- hidden <p>comment</p> --><ul><li>One</li><li>Two&#x21;</li></ul>
            <img src=x alt="cover"><table><tr><td>a</td><td>b</td></tr></table></body></html>"#;
        let (title, text) = html_to_text(html);
        assert_eq!(title.as_deref(), Some("Shelf finder"));
        assert!(text.contains("# Books & more"), "{text}");
        assert!(text.contains("Find a book (/s?q=1)."), "{text}");
        assert!(text.contains("- One\n- Two!"), "{text}");
        assert!(text.contains("[image: cover]"), "{text}");
        assert!(!text.contains("alert"), "{text}");
        assert!(!text.contains("color:red"), "{text}");
        assert!(!text.contains("comment"), "{text}");
    }

    #[test]
    fn hostile_input_does_not_panic() {
        for s in [
            "<",
            "<<>>",
            "&#xFFFFFFFF;",
            "&#;",
            "<a href=",
            "<script>never closed",
            "é<p>ü&",
            "<a href='x'>",
        ] {
            let _ = html_to_text(s);
        }
    }
}
