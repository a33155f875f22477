//! The compact observation text the model sees: one line per element ([`element_line`]) and the
//! whole page within a character budget ([`render`]). The format is described in `observe/mod.rs`.

use serde_json::Value;

use super::{Element, Frame, Observation};

/// The budget the tools render with when no max_chars is given (`tools::DEFAULT_BUDGET`).
pub(crate) const DEFAULT_BUDGET: usize = 6000;

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// One line for an element.
pub fn element_line(e: &Element) -> String {
    let mut line = format!("{} {}", e.reference, e.role);
    if !e.name.is_empty() {
        line.push(' ');
        line.push_str(&quote(&e.name));
    } else if let Some(h) = e.hint.as_deref().filter(|h| !h.is_empty()) {
        line.push_str(&format!(" hint={}", quote(h)));
    }
    let st = &e.state;
    if let Some(t) = st.get("type").and_then(Value::as_str) {
        line.push_str(&format!(" type={t}"));
    }
    if let Some(v) = st.get("value").and_then(Value::as_str) {
        // Exact: JSON escaping keeps spaces and shows newlines, tabs and quotes as \n, \t, \".
        line.push_str(&format!(" value={}", quote(v)));
        if let Some(n) = st.get("valueLength").and_then(Value::as_u64) {
            line.push_str(&format!(" ({} chars)", thousands(n)));
        }
    }
    if let Some(v) = st.get("ariaValue").and_then(Value::as_str) {
        line.push_str(&format!(" value={}", quote(v)));
        if let Some(r) = st.get("range").and_then(Value::as_str) {
            line.push_str(&format!(" range={}", quote(r)));
        }
    }
    if let Some(s) = st.get("sort").and_then(Value::as_str) {
        line.push_str(&format!(" sorted {s}"));
    }
    match st.get("checked") {
        Some(Value::Bool(true)) => line.push_str(" checked"),
        Some(Value::Bool(false)) => line.push_str(" unchecked"),
        Some(Value::String(s)) => line.push_str(&format!(" checked={s}")),
        _ => {}
    }
    if let Some(sel) = st.get("selected").and_then(Value::as_array) {
        let s: Vec<String> = sel.iter().filter_map(Value::as_str).map(quote).collect();
        line.push_str(&format!(
            " selected={}",
            if s.is_empty() {
                "none".into()
            } else {
                s.join(",")
            }
        ));
        if let Some(opts) = st.get("options").and_then(Value::as_array) {
            let o: Vec<String> = opts.iter().filter_map(Value::as_str).map(quote).collect();
            let count = st
                .get("optionCount")
                .and_then(Value::as_u64)
                .unwrap_or(o.len() as u64);
            line.push_str(&format!(" options={}", o.join(",")));
            if count > o.len() as u64 {
                line.push_str(&format!(",+{}", count - o.len() as u64));
            }
        }
    }
    for flag in ["multiple", "required", "readonly", "disabled"] {
        if st.get(flag) == Some(&Value::Bool(true)) {
            line.push(' ');
            line.push_str(flag);
        }
    }
    let children = if st.get("children") == Some(&Value::Bool(true)) {
        " has children,"
    } else {
        ""
    };
    match st.get("expanded") {
        Some(Value::Bool(true)) => line.push_str(&format!("{children} expanded")),
        Some(Value::Bool(false)) => line.push_str(&format!("{children} collapsed")),
        _ => {}
    }
    if let Some(sc) = st.get("scroll").and_then(Value::as_object) {
        let y = sc.get("y").and_then(Value::as_u64).unwrap_or(0);
        let max = sc.get("max").and_then(Value::as_u64).unwrap_or(0);
        line.push_str(&format!(" scroll {}/{}px", thousands(y), thousands(max)));
        if let Some(n) = st.get("itemsBelow").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} more items below in this list"));
        }
        if let Some(n) = st.get("itemsAbove").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} above"));
        }
    }
    if let Some(sc) = st.get("scrollX").and_then(Value::as_object) {
        let x = sc.get("x").and_then(Value::as_u64).unwrap_or(0);
        let max = sc.get("max").and_then(Value::as_u64).unwrap_or(0);
        line.push_str(&format!(" scroll x {}/{}px", thousands(x), thousands(max)));
        if let Some(n) = st.get("itemsRight").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} more items to the right"));
        }
        if let Some(n) = st.get("itemsLeft").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} to the left"));
        }
    }
    if st.get("selectedItem") == Some(&Value::Bool(true)) {
        line.push_str(" selected");
    }
    if st.get("fillProtected") == Some(&Value::Bool(true)) {
        line.push_str(" fill-protected");
    }
    if let Some(h) = st.get("href").and_then(Value::as_str) {
        line.push_str(&format!(" -> {h}"));
        if st.get("newTab") == Some(&Value::Bool(true)) {
            line.push_str(" (new tab)");
        }
    }
    match e.clipped.as_deref() {
        Some("list") => line.push_str(" [scrolled out of its list]"),
        Some(_) => line.push_str(" [clipped by its container]"),
        None => {}
    }
    if let Some(c) = &e.covered_by {
        line.push_str(&format!(" [covered by {c}]"));
    }
    line
}

/// `1450` as `1,450`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Render `obs` in about `budget` characters: header, in-view elements in reading order, a
/// summary of the others, then a page-text excerpt with what is left.
pub fn render(obs: &Observation, budget: usize) -> String {
    let budget = budget.max(400);
    let mut out = String::new();
    out.push_str(&format!("page: {}\nurl: {}\n", obs.title, obs.url));
    if obs.layout_unknown {
        // As short as the `viewport:` line it replaces (every observation carries it).
        out.push_str("layout: none on this engine (what is in view or covered is unknown)\n");
    } else {
        out.push_str(&format!(
            "viewport: {}x{}, scrolled {} of {}px\n",
            obs.viewport.width as i64,
            obs.viewport.height as i64,
            obs.scroll.y as i64,
            obs.scroll.height as i64
        ));
    }
    // With layout the list holds what is in view, within 70% of the budget. Without it nothing
    // is known to be in view, and a list filling 70% would make every observation of a long
    // page budget-sized (Lightpanda's were 6.0-6.3 KB on all 12 readability pages of the corpus
    // against Chromium's 2.6-6.3 KB, median 3.9 KB): of the default budget the list gets, after
    // the header, the share an in-view list takes (a median of 1,420 of 6,000 characters in
    // Chromium on those pages, about a quarter), and 70% of any room asked for beyond it, so a
    // larger max_chars lists more; the rest is counted.
    let element_budget = if obs.layout_unknown {
        out.len() + budget.min(DEFAULT_BUDGET) / 4 + budget.saturating_sub(DEFAULT_BUDGET) * 7 / 10
    } else {
        budget * 7 / 10
    };
    let mut above = 0usize;
    let mut below = 0usize;
    let mut cut = 0usize;
    let mut listed = 0usize;
    let mut lines = String::new();
    let mut frames_done: Vec<&str> = Vec::new();
    // The row whose controls are being listed, and whether its header is a listed control.
    let mut current_row: Option<&str> = None;
    for e in &obs.elements {
        match e.location.as_str() {
            "above" => {
                above += 1;
                continue;
            }
            "below" | "side" => {
                below += 1;
                continue;
            }
            // Scrolled out of its list beyond the first few: the list's line counts them.
            "inlist" => continue,
            _ => {}
        }
        let mut line = String::new();
        let row = e.row.as_deref();
        if row != current_row {
            if let Some(r) = row.filter(|r| *r != e.reference) {
                if let Some(h) = obs.rows.iter().find(|h| h.reference == r) {
                    line.push_str(&format!("{} row {}\n", h.reference, quote(&h.text)));
                }
            }
        }
        let header_row = current_row;
        current_row = row;
        // Introduce a frame before its first element.
        if let Some(fnum) = e
            .reference
            .strip_prefix('f')
            .and_then(|r| r.split('e').next())
        {
            let key = format!("f{fnum}");
            if !frames_done.contains(&key.as_str()) {
                if let Some(f) = obs.frames.iter().find(|f| f.frame == key) {
                    frames_done.push(&f.frame);
                    line.push_str(&frame_line(f));
                    line.push('\n');
                }
            }
        }
        if row.is_some_and(|r| r != e.reference) {
            line.push_str("  ");
        }
        line.push_str(&element_line(e));
        if row == Some(e.reference.as_str()) {
            // The control is itself the row: its controls follow, indented.
            line.push_str(" (row)");
        }
        line.push('\n');
        if out.len() + lines.len() + line.len() > element_budget {
            cut += 1;
            // Its row header (if it carried one) was not printed either.
            current_row = header_row;
            continue;
        }
        lines.push_str(&line);
        listed += 1;
    }
    let frames_rest: Vec<String> = obs
        .frames
        .iter()
        .filter(|f| !frames_done.contains(&f.frame.as_str()))
        .map(frame_line)
        .collect();
    out.push_str(match (listed > 0, obs.layout_unknown) {
        (true, false) => "elements (in view, reading order):\n",
        (false, false) => "elements in view: none\n",
        (true, true) => "elements (reading order):\n",
        (false, true) => "elements: none\n",
    });
    out.push_str(&lines);
    for f in frames_rest {
        if out.len() + f.len() < element_budget + 400 {
            out.push_str(&f);
            out.push('\n');
        }
    }
    if above + below + cut > 0 {
        let mut parts = Vec::new();
        if cut > 0 {
            parts.push(if obs.layout_unknown {
                format!("{cut} more not listed")
            } else {
                format!("{cut} more in view not listed")
            });
        }
        if below > 0 {
            parts.push(format!("{below} more below"));
        }
        if above > 0 {
            parts.push(format!("{above} above"));
        }
        out.push_str(&format!(
            "{} ({})\n",
            parts.join(", "),
            if obs.layout_unknown {
                // No layout: scrolling changes nothing in the list; more room does.
                "browser_state with a larger max_chars to see them"
            } else {
                "browser_state with scroll=1/-1, scroll_to=<ref> or a larger max_chars to see them"
            }
        ));
    }
    // The excerpt gets at most a third of the budget: the element list is what the model acts
    // on, and browser_extract has the full text.
    let left = budget.saturating_sub(out.len() + 8).min(budget / 3);
    out.push_str("text:\n");
    let text = obs.text.trim();
    if text.chars().count() <= left {
        out.push_str(text);
    } else {
        let mut cut_at: String = text.chars().take(left.saturating_sub(80)).collect();
        // End on a whole line (a block's ref line stays whole) when that loses little.
        if let Some(i) = cut_at.rfind('\n').filter(|i| *i >= cut_at.len() * 3 / 4) {
            cut_at.truncate(i);
        }
        let total = text.chars().count();
        out.push_str(&cut_at);
        out.push_str(&format!(
            "\n… ({} more chars; browser_extract for the full text)",
            total - cut_at.chars().count()
        ));
    }
    out
}

fn frame_line(f: &Frame) -> String {
    let mut s = format!("{}: iframe", f.frame);
    if !f.name.is_empty() {
        s.push(' ');
        s.push_str(&quote(&f.name));
    }
    if let Some(why) = &f.blocked {
        s.push_str(&format!(" blocked {} ({why})", quote(&f.src)));
    } else if f.same_origin {
        s.push_str(&format!(" same-origin {}", f.origin));
    } else if f.unreachable && !f.walked {
        s.push_str(&format!(
            " same-origin {} (its document is not reachable on this engine)",
            f.origin
        ));
    } else if f.walked {
        s.push_str(&format!(" cross-origin {}", f.origin));
    } else {
        s.push_str(&format!(" cross-origin {} (content not walked)", f.origin));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{Row, Scroll, Viewport};

    fn el(r: &str, role: &str, name: &str, loc: &str, state: Value) -> Element {
        Element {
            reference: r.into(),
            role: role.into(),
            name: name.into(),
            state: state.as_object().cloned().unwrap_or_default(),
            location: loc.into(),
            covered_by: None,
            hint: None,
            row: None,
            clipped: None,
        }
    }

    #[test]
    fn element_lines_carry_state() {
        let e = el(
            "e3",
            "combobox",
            "Country",
            "in",
            serde_json::json!({"selected": ["France"], "options": ["France", "Spain"], "optionCount": 5, "required": true}),
        );
        assert_eq!(
            element_line(&e),
            "e3 combobox \"Country\" selected=\"France\" options=\"France\",\"Spain\",+3 required"
        );
        let mut b = el("f1e4", "button", "Pay", "in", serde_json::json!({}));
        b.covered_by = Some("div#overlay \"Cookies\"".into());
        assert_eq!(
            element_line(&b),
            "f1e4 button \"Pay\" [covered by div#overlay \"Cookies\"]"
        );
        let p = el(
            "e5",
            "textbox",
            "Password",
            "in",
            serde_json::json!({"type": "password", "value": "", "fillProtected": true}),
        );
        assert_eq!(
            element_line(&p),
            "e5 textbox \"Password\" type=password value=\"\" fill-protected"
        );
    }

    /// A long page (9,000 px, 5,000 words of text) holding `elements`.
    fn long_page(elements: Vec<Element>) -> Observation {
        Observation {
            layout_unknown: false,
            url: "http://127.0.0.1/".into(),
            title: "T".into(),
            viewport: Viewport {
                width: 1280.0,
                height: 800.0,
            },
            scroll: Scroll {
                y: 0.0,
                height: 9000.0,
            },
            elements,
            frames: vec![],
            rows: vec![],
            text: "word ".repeat(5000),
        }
    }

    #[test]
    fn render_summarises_offscreen_elements_and_respects_the_budget() {
        let mut elements = vec![el(
            "e1",
            "link",
            "Home",
            "in",
            serde_json::json!({"href": "/"}),
        )];
        for i in 2..200 {
            elements.push(el(
                &format!("e{i}"),
                "link",
                &format!("Item {i}"),
                "below",
                serde_json::json!({}),
            ));
        }
        let obs = long_page(elements);
        let out = render(&obs, 6000);
        assert!(out.len() <= 6100, "{}", out.len());
        assert!(out.contains("e1 link \"Home\" -> /"));
        assert!(out.contains("198 more below"));
        assert!(out.contains("browser_extract for the full text"));
        assert_eq!(render(&obs, 6000), out, "deterministic");
    }

    #[test]
    fn values_are_exact_hints_trees_scroll_and_clips_render() {
        let v = el(
            "e1",
            "textbox",
            "Note",
            "in",
            serde_json::json!({"value": " a \"b\"\n\tc "}),
        );
        assert_eq!(
            element_line(&v),
            "e1 textbox \"Note\" value=\" a \\\"b\\\"\\n\\tc \""
        );
        let long = el(
            "e2",
            "textbox",
            "Long",
            "in",
            serde_json::json!({"value": format!("{}…", "x".repeat(60)), "valueLength": 1450}),
        );
        assert!(element_line(&long).ends_with("…\" (1,450 chars)"));
        let mut h = el("e3", "button", "", "in", serde_json::json!({}));
        h.hint = Some("star".into());
        assert_eq!(element_line(&h), "e3 button hint=\"star\"");
        let t = el(
            "e4",
            "clickable",
            "Documents",
            "in",
            serde_json::json!({"children": true, "expanded": false}),
        );
        assert_eq!(
            element_line(&t),
            "e4 clickable \"Documents\" has children, collapsed"
        );
        let s = el(
            "e5",
            "scrollable",
            "",
            "in",
            serde_json::json!({"scroll": {"y": 0, "max": 1450}, "itemsBelow": 12}),
        );
        assert_eq!(
            element_line(&s),
            "e5 scrollable scroll 0/1,450px, 12 more items below in this list"
        );
        let mut c = el("e6", "button", "Item 9", "in", serde_json::json!({}));
        c.clipped = Some("list".into());
        assert_eq!(
            element_line(&c),
            "e6 button \"Item 9\" [scrolled out of its list]"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn controls_of_a_row_are_grouped_under_its_header() {
        let mut elements = Vec::new();
        for (i, row) in [(1, "e10"), (3, "e11")] {
            for (j, hint) in ["star", "trash"].iter().enumerate() {
                let mut b = el(
                    &format!("e{}", i + j),
                    "button",
                    "",
                    "in",
                    serde_json::json!({}),
                );
                b.hint = Some((*hint).into());
                b.row = Some(row.into());
                elements.push(b);
            }
        }
        elements.push(el("e5", "link", "Next", "in", serde_json::json!({})));
        let obs = Observation {
            layout_unknown: false,
            url: "http://127.0.0.1/".into(),
            title: "Mail".into(),
            viewport: Viewport {
                width: 1280.0,
                height: 800.0,
            },
            scroll: Scroll {
                y: 0.0,
                height: 800.0,
            },
            elements,
            frames: vec![],
            rows: vec![
                Row {
                    reference: "e10".into(),
                    text: "From Jane: Lunch?".into(),
                },
                Row {
                    reference: "e11".into(),
                    text: "From Bob: Report".into(),
                },
            ],
            text: String::new(),
        };
        let out = render(&obs, 6000);
        assert!(
            out.contains(
                "e10 row \"From Jane: Lunch?\"\n  e1 button hint=\"star\"\n  e2 button hint=\"trash\"\ne11 row \"From Bob: Report\"\n  e3 button hint=\"star\"\n  e4 button hint=\"trash\"\ne5 link \"Next\"\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn without_layout_layout_facts_are_dropped_and_the_list_takes_a_quarter_of_the_budget() {
        // What Lightpanda's synthetic boxes gave on a long page: far-down links "below", some
        // "clipped by its container", a scroll container with a position.
        let mut elements = vec![el(
            "e1",
            "scrollable",
            "",
            "in",
            serde_json::json!({"scroll": {"y": 0, "max": 1450}, "itemsBelow": 12}),
        )];
        for i in 2..200 {
            let mut e = el(
                &format!("e{i}"),
                "link",
                &format!("Item {i}"),
                if i < 20 { "in" } else { "below" },
                serde_json::json!({}),
            );
            if i % 3 == 0 {
                e.clipped = Some("clip".into());
            }
            if i == 5 {
                e.covered_by = Some("div#banner".into());
            }
            elements.push(e);
        }
        let mut obs = long_page(elements);
        crate::observe::forget_layout(&mut obs);
        let out = render(&obs, 6000);
        for invented in [
            "[clipped",
            "[covered",
            "scroll 0/",
            "items below",
            "viewport:",
        ] {
            assert!(!out.contains(invented), "{invented} in:\n{out}");
        }
        assert!(out.contains("layout: none on this engine"), "{out}");
        let list = out
            .split_once("elements (reading order):\n")
            .and_then(|(_, rest)| rest.split_once(" more not listed"))
            .and_then(|(list, _)| list.rsplit_once('\n'))
            .map(|(list, _count)| list)
            .unwrap_or_else(|| panic!("a list and a count in:\n{out}"));
        assert!(
            list.len() <= 6000 / 4 && list.len() > 6000 / 5,
            "{} chars of elements",
            list.len()
        );
        assert!(
            out.contains("more not listed (browser_state with a larger max_chars to see them)"),
            "{out}"
        );
        assert!(!out.contains("more below"), "{out}");
        // The text excerpt keeps its third of the budget.
        let text = out.split_once("\ntext:\n").map(|(_, t)| t).unwrap_or("");
        assert!(text.len() > 6000 / 3 - 200, "{} chars of text", text.len());
        // More room lists every element, in reading order.
        let all = render(&obs, 60_000);
        assert!(!all.contains("more not listed"), "{all}");
        assert!(
            all.contains("e2 link \"Item 2\"\ne3 link \"Item 3\"\n"),
            "{all}"
        );
        assert!(all.contains("e199 link \"Item 199\""), "{all}");
    }

    #[test]
    fn a_same_origin_frame_without_a_document_is_not_called_cross_origin() {
        let f = Frame {
            frame: "f1".into(),
            name: "uno".into(),
            origin: "http://127.0.0.1:8080".into(),
            same_origin: false,
            src: "./frame.html".into(),
            at: None,
            blocked: None,
            unreachable: true,
            walked: false,
        };
        assert_eq!(
            frame_line(&f),
            "f1: iframe \"uno\" same-origin http://127.0.0.1:8080 (its document is not reachable on this engine)"
        );
        let cross = Frame {
            unreachable: false,
            ..f
        };
        assert_eq!(
            frame_line(&cross),
            "f1: iframe \"uno\" cross-origin http://127.0.0.1:8080 (content not walked)"
        );
    }
}
