//! The observation on widget pages: icon-only controls, rows, exact values, trees, lists,
//! scroll containers, text blocks with refs and click listeners in frames and shadow roots.
//! Real Chromium through the real egress proxy against a loopback server; one Chromium is shared
//! by the tests in this file (each test has its own session, so its own browser context).

use std::sync::OnceLock;

use forge_browser::{browser_tools, BrowserToolOptions};
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolContext;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    server: Site,
}

const ICONS: &str = r##"<!doctype html><title>Icons</title>
<style>.ico{display:inline-block;width:24px;height:24px;cursor:pointer}
.bg-share{background-image:url(/img/share-icon.png);background-size:cover}</style>
<h1>Icons</h1>
<div id="icons">
<button id="b1"><svg width="16" height="16"><title>Star</title><circle cx="8" cy="8" r="6"/></svg></button>
<button id="b2"><i class="fa fa-trash"></i></button>
<button id="b3" class="btn reply-btn"></button>
<span id="b4" class="ico bg-share" onclick="void 0"></span>
<button id="b5"><span class="material-icons">favorite</span></button>
<button id="b6" data-action="archive-thread"></button>
<button id="b7"><svg width="16" height="16"><use href="#icon-bookmark"></use></svg></button>
</div>"##;

const MAIL: &str = r##"<!doctype html><title>Inbox</title>
<style>.mail{display:flex;gap:8px;padding:4px;border-bottom:1px solid #ccc} .mail button{width:24px;height:24px}</style>
<h1>Inbox</h1>
<div id="mails">
<div class="mail" data-from="Jane"><button class="star"></button><span>From Jane: Lunch?</span><button class="trash"></button></div>
<div class="mail" data-from="Bob"><button class="star"></button><span>From Bob: Report due</span><button class="trash"></button></div>
<div class="mail" data-from="Kim"><button class="star"></button><span>From Kim: Party</span><button class="trash"></button></div>
</div>
<p id="log">nothing starred</p>
<script>
document.getElementById('mails').addEventListener('click', (e) => {
  const row = e.target.closest('.mail');
  if (e.target.classList.contains('star')) document.getElementById('log').textContent = 'starred ' + row.dataset.from;
});
</script>"##;

const VALUES: &str = r##"<!doctype html><title>Values</title>
<label for="v">Note</label><input id="v">
<label for="long">Long</label><input id="long">
<textarea id="ta" aria-label="Body"></textarea>
<label for="typed">Typed</label><input id="typed">
<script>
document.getElementById('v').value = '  two words \t ';
document.getElementById('ta').value = 'line one\nline "two" ';
document.getElementById('long').value = 'y'.repeat(100);
</script>"##;

const TREE: &str = r##"<!doctype html><title>Tree</title>
<style>.tree ul.nested{display:none} .tree ul.nested.open{display:block} .tree .caret{cursor:pointer}</style>
<ul class="tree">
<li><span class="caret">Documents</span><ul class="nested"><li>Report.pdf</li></ul></li>
<li><span class="caret">Pictures</span><ul class="nested open"><li>Cat.png</li></ul></li>
<li><span class="caret">readme.txt</span></li>
</ul>
<script>
for (const c of document.querySelectorAll('.caret')) c.addEventListener('click', () => {
  const sub = c.parentElement.querySelector('.nested');
  if (sub) sub.classList.toggle('open');
});
</script>"##;

const LISTS: &str = r##"<!doctype html><title>Lists</title>
<ul role="menu"><li role="menuitem" onclick="void 0"><a href="#open">Open</a></li><li role="menuitem"><a href="#save">Save</a></li></ul>
<div id="wrap" style="cursor:pointer" onclick="void 0"><a href="#only">Only link</a></div>
<input id="ac" aria-label="Fruit">
<ul id="acl" role="listbox" tabindex="0"><li>Apple</li><li>Apricot</li><li>Avocado</li></ul>
<p id="picked">none picked</p>
<script>
document.getElementById('acl').addEventListener('click', (e) => {
  document.getElementById('picked').textContent = 'picked ' + e.target.textContent;
});
</script>"##;

const SCROLL: &str = r##"<!doctype html><title>Scroll</title>
<style>#list{height:100px;overflow-y:auto;border:1px solid #000;margin:0;padding:0} #list li{height:30px}</style>
<h1>Pick one</h1>
<ul id="list">
<li><button>Item 1</button></li><li><button>Item 2</button></li><li><button>Item 3</button></li><li><button>Item 4</button></li>
<li><button>Item 5</button></li><li><button>Item 6</button></li><li><button>Item 7</button></li><li><button>Item 8</button></li>
</ul>
<div style="position:relative;height:60px"><button id="under">Covered Button</button><div style="position:absolute;left:0;top:0;width:300px;height:50px;background:#eee">Banner</div></div>"##;

const TEXT: &str = r##"<!doctype html><title>Text</title>
<h1>Article</h1>
<p>First paragraph with <a href="#x">a link</a> inside.</p>
<div style="height:3000px">spacer</div>
<p id="far">The far paragraph at the end.</p>"##;

const LISTENERS: &str = r##"<!doctype html><title>Listeners</title>
<iframe src="/lframe.html" title="Inner" width="400" height="120"></iframe>
<listen-host></listen-host>
<script>
customElements.define('listen-host', class extends HTMLElement {
  constructor() {
    super();
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<div id="sd">Shadow listener div</div><p id="sout">shadow untouched</p>';
    root.getElementById('sd').addEventListener('click', () => { root.getElementById('sout').textContent = 'shadow clicked'; });
  }
});
</script>"##;

const LFRAME: &str = r##"<!doctype html><title>Frame</title>
<div id="fd">Frame listener div</div><p id="fout">frame untouched</p>
<script>document.getElementById('fd').addEventListener('click', () => { document.getElementById('fout').textContent = 'frame clicked'; });</script>"##;

const DRAG_TREE: &str = r##"<!doctype html><title>Board and files</title>
<style>.zone{display:inline-block;vertical-align:top;width:200px;min-height:160px;margin:8px;border:2px dashed #aaa}.card{padding:8px;margin:4px;border:1px solid #888}</style>
<div class="zone" id="todo"><div class="card" draggable="true" id="c1">Write report</div><div class="card" draggable="true" id="c2">Plan sprint</div></div>
<div class="zone" id="done"><p>Drop cards here</p></div>
<ul id="files">
<li><span class="lbl">src</span><ul hidden><li><span class="lbl">lib.rs</span></li><li>main.rs</li></ul></li>
<li><span class="lbl">Cargo.toml</span></li></ul>
<ul id="plain"><li>Not clickable</li></ul>
<p id="out">nothing yet</p>
<script>
document.querySelectorAll('.card').forEach((c) => c.addEventListener('dragstart', (e) => e.dataTransfer.setData('text/plain', c.id)));
document.querySelectorAll('.zone').forEach((z) => {
  z.addEventListener('dragover', (e) => e.preventDefault());
  z.addEventListener('drop', (e) => { e.preventDefault(); const c = document.getElementById(e.dataTransfer.getData('text/plain')); if (c) { z.appendChild(c); document.getElementById('out').textContent = 'dropped ' + c.textContent + ' in ' + z.id; } });
});
document.getElementById('files').addEventListener('click', (e) => {
  const sub = e.target.nextElementSibling;
  if (sub && sub.tagName === 'UL') { sub.hidden = !sub.hidden; return; }
  if (e.target.tagName === 'SPAN' || e.target.tagName === 'LI') document.getElementById('out').textContent = 'opened ' + e.target.textContent;
});
</script>"##;

fn page(path: &str) -> Response {
    let body = match path.split('?').next().unwrap_or(path) {
        "/icons.html" => ICONS,
        "/mail.html" => MAIL,
        "/values.html" => VALUES,
        "/tree.html" => TREE,
        "/lists.html" => LISTS,
        "/scroll.html" => SCROLL,
        "/text.html" => TEXT,
        "/listeners.html" => LISTENERS,
        "/lframe.html" => LFRAME,
        "/dragtree.html" => DRAG_TREE,
        "/after.html" => "<!doctype html><title>After</title><button>After button</button>",
        _ => return Response::not_found(),
    };
    Response::html(body)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r: &Request| page(&r.path));
        let b = Shared::start(
            "forge-browser observe_widgets tests",
            &[server.entry()],
            Confine::No,
        )?;
        Some(Fixture { b, server })
    })
    .as_ref()
}

impl Fixture {
    fn ok(&self, session: &str, name: &str, input: Value) -> String {
        let ctx = ToolContext::new(session, self.b.files.path());
        let tool = browser_tools(self.b.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == name)
            .expect("tool exists");
        match self
            .b
            .rt
            .block_on(async { tool.execute(&ctx, input.clone()).await.map(|o| o.text) })
        {
            Ok(t) => t,
            Err(e) => panic!("{name} {input} failed: {e}"),
        }
    }

    fn open(&self, session: &str, path: &str) -> String {
        self.ok(
            session,
            "browser_navigate",
            json!({"url": self.server.url(path)}),
        )
    }
}

/// The lines of the element list (between `elements` and `text:`).
fn element_lines(obs: &str) -> Vec<&str> {
    obs.lines()
        .skip_while(|l| !l.starts_with("elements"))
        .skip(1)
        .take_while(|l| *l != "text:")
        .collect()
}

/// The one element line containing `needle` (panics when there is none or several).
fn line_with<'a>(obs: &'a str, needle: &str) -> &'a str {
    let found: Vec<&str> = element_lines(obs)
        .into_iter()
        .filter(|l| l.contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "one line with {needle:?} in:\n{obs}");
    found[0]
}

fn ref_in(line: &str) -> String {
    line.split_whitespace().next().expect("ref").to_string()
}

#[test]
fn icon_only_buttons_get_distinct_hints() {
    let Some(f) = fixture() else { return };
    let obs = f.open("icons", "/icons.html");
    for (tag, hint) in [
        ("button", "Star"),
        ("button", "trash"),
        ("button", "reply"),
        ("clickable", "share"),
        ("button", "favorite"),
        ("button", "archive thread"),
        ("button", "bookmark"),
    ] {
        let line = line_with(&obs, &format!("hint=\"{hint}\""));
        assert!(
            line.contains(&format!("{tag} hint=\"{hint}\"")),
            "{line}\n{obs}"
        );
    }
    // Hints are hints, not names.
    assert!(!obs.contains("button \"Star\""), "{obs}");
    assert!(!obs.contains("button \"favorite\""), "{obs}");
}

#[test]
fn mail_rows_group_their_star_and_trash_and_the_right_star_is_clicked() {
    let Some(f) = fixture() else { return };
    let obs = f.open("mail", "/mail.html");
    let lines = element_lines(&obs);
    for who in [
        "From Jane: Lunch?",
        "From Bob: Report due",
        "From Kim: Party",
    ] {
        let i = lines
            .iter()
            .position(|l| l.contains(&format!("row \"{who}\"")))
            .unwrap_or_else(|| panic!("row {who}:\n{obs}"));
        assert!(
            lines[i + 1].starts_with("  ") && lines[i + 1].contains("button hint=\"star\""),
            "{obs}"
        );
        assert!(
            lines[i + 2].starts_with("  ") && lines[i + 2].contains("button hint=\"trash\""),
            "{obs}"
        );
    }
    // "Star the email from Bob" is one step: the star under Bob's row.
    let i = lines
        .iter()
        .position(|l| l.contains("row \"From Bob: Report due\""))
        .expect("bob row");
    let star = ref_in(lines[i + 1]);
    let out = f.ok("mail", "browser_click", json!({"ref": star}));
    assert!(out.contains("starred Bob"), "{out}");
}

#[test]
fn field_values_are_shown_exactly() {
    let Some(f) = fixture() else { return };
    let obs = f.open("values", "/values.html");
    assert!(
        line_with(&obs, "\"Note\"").ends_with(r#"value="  two words \t ""#),
        "{obs}"
    );
    assert!(
        line_with(&obs, "\"Body\"").ends_with(r#"value="line one\nline \"two\" ""#),
        "{obs}"
    );
    let long = line_with(&obs, "\"Long\"");
    assert!(
        long.ends_with(&format!("value=\"{}…\" (100 chars)", "y".repeat(60))),
        "{long}"
    );
    let r = ref_in(line_with(&obs, "\"Typed\""));
    let out = f.ok(
        "values",
        "browser_fill",
        json!({"ref": r, "value": " padded  "}),
    );
    assert!(
        line_with(&out, "\"Typed\"").ends_with(r#"value=" padded  ""#),
        "{out}"
    );
}

#[test]
fn a_tree_without_aria_shows_collapsed_and_expanded_folders() {
    let Some(f) = fixture() else { return };
    let obs = f.open("tree", "/tree.html");
    let docs = line_with(&obs, "\"Documents\"");
    assert!(docs.ends_with("has children, collapsed"), "{obs}");
    assert!(
        line_with(&obs, "\"Pictures\"").ends_with("has children, expanded"),
        "{obs}"
    );
    let file = line_with(&obs, "\"readme.txt\"");
    assert!(
        !file.contains("children") && !file.contains("collapsed"),
        "{file}"
    );
    let out = f.ok("tree", "browser_click", json!({"ref": ref_in(docs)}));
    assert!(
        line_with(&out, "\"Documents\"").ends_with("has children, expanded"),
        "{out}"
    );
}

#[test]
fn each_node_is_listed_once_and_list_items_each_get_a_line() {
    let Some(f) = fixture() else { return };
    let obs = f.open("lists", "/lists.html");
    let open = line_with(&obs, "\"Open\"");
    assert!(open.contains("menuitem \"Open\" -> #open"), "{obs}");
    assert!(
        line_with(&obs, "\"Save\"").contains("menuitem \"Save\""),
        "{obs}"
    );
    assert!(
        line_with(&obs, "\"Only link\"").contains("link \"Only link\""),
        "{obs}"
    );
    for fruit in ["Apple", "Apricot", "Avocado"] {
        assert!(
            line_with(&obs, &format!("\"{fruit}\"")).contains(&format!("option \"{fruit}\"")),
            "{obs}"
        );
    }
    assert!(
        !element_lines(&obs)
            .iter()
            .any(|l| l.contains("Apple Apricot")),
        "no joined name: {obs}"
    );
    let apricot = ref_in(line_with(&obs, "\"Apricot\""));
    let out = f.ok("lists", "browser_click", json!({"ref": apricot}));
    assert!(out.contains("picked Apricot"), "{out}");
}

#[test]
fn a_scroll_container_shows_its_position_and_marks_what_it_clips() {
    let Some(f) = fixture() else { return };
    let obs = f.open("scroll", "/scroll.html");
    let list = line_with(&obs, "scrollable");
    assert!(
        list.contains(" scroll 0/") && list.contains("more items below in this list"),
        "{obs}"
    );
    let item5 = line_with(&obs, "\"Item 5\"");
    assert!(item5.ends_with("[scrolled out of its list]"), "{obs}");
    assert!(!item5.contains("covered"), "{obs}");
    assert!(
        line_with(&obs, "\"Item 1\"").ends_with("button \"Item 1\""),
        "{obs}"
    );
    // A real cover keeps its mark.
    assert!(
        line_with(&obs, "Covered Button").contains("[covered by div"),
        "{obs}"
    );
    // At most three clipped controls per list are listed; the list line counts the rest.
    assert!(
        !element_lines(&obs).iter().any(|l| l.contains("\"Item 8\"")),
        "{obs}"
    );
    let out = f.ok(
        "scroll",
        "browser_state",
        json!({"scroll_to": ref_in(item5)}),
    );
    assert!(
        !line_with(&out, "scrollable").contains(" scroll 0/"),
        "{out}"
    );
    assert!(
        !line_with(&out, "\"Item 5\"").contains("scrolled out"),
        "{out}"
    );
}

#[test]
fn text_blocks_carry_refs_that_scroll_to_and_hover_accept() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "text",
        "browser_navigate",
        json!({"url": f.server.url("/text.html")}),
    );
    let text: Vec<&str> = obs.lines().skip_while(|l| *l != "text:").collect();
    assert!(
        text.iter()
            .any(|l| l.ends_with(" p \"First paragraph with a link inside.\"")),
        "{obs}"
    );
    assert!(text.iter().any(|l| l.ends_with(" h1 \"Article\"")), "{obs}");
    let far = text
        .iter()
        .find(|l| l.ends_with(" p \"The far paragraph at the end.\""))
        .unwrap_or_else(|| panic!("far paragraph: {obs}"));
    let r = ref_in(far);
    assert!(r.starts_with('e'), "{far}");
    assert!(obs.contains("scrolled 0 of"), "{obs}");
    let out = f.ok("text", "browser_state", json!({"scroll_to": r}));
    assert!(
        !out.contains("scrolled 0 of"),
        "scrolled to the block: {out}"
    );
    f.ok("text", "browser_hover", json!({"ref": r}));
}

#[test]
fn click_listeners_inside_frames_and_shadow_roots_are_detected() {
    let Some(f) = fixture() else { return };
    let obs = f.open("listen", "/listeners.html");
    let frame = line_with(&obs, "\"Frame listener div\"");
    assert!(frame.contains("clickable"), "{obs}");
    assert!(ref_in(frame).starts_with("f1e"), "{frame}");
    let shadow = line_with(&obs, "\"Shadow listener div\"");
    assert!(shadow.contains("clickable"), "{obs}");
    let out = f.ok("listen", "browser_click", json!({"ref": ref_in(frame)}));
    assert!(out.contains("frame clicked"), "{out}");
    let out = f.ok("listen", "browser_click", json!({"ref": ref_in(shadow)}));
    assert!(out.contains("shadow clicked"), "{out}");
    // Reading frame listeners must not break the next navigation's isolated world.
    let next = f.open("listen", "/after.html");
    assert!(next.contains("button \"After button\""), "{next}");
    let back = f.open("listen", "/listeners.html");
    assert!(back.contains("\"Frame listener div\""), "{back}");
}

#[test]
fn draggable_cards_are_listed_and_can_be_dragged_by_ref() {
    let Some(f) = fixture() else { return };
    let obs = f.open("dragcards", "/dragtree.html");
    let card = line_with(&obs, "\"Write report\"");
    assert!(card.contains("draggable \"Write report\""), "{obs}");
    assert!(
        line_with(&obs, "\"Plan sprint\"").contains("draggable"),
        "{obs}"
    );
    let zone = obs
        .lines()
        .find(|l| l.contains("p \"Drop cards here\""))
        .unwrap_or_else(|| panic!("drop zone text block:\n{obs}"));
    let out = f.ok(
        "dragcards",
        "browser_drag",
        json!({"from": ref_in(card), "to": ref_in(zone)}),
    );
    assert!(out.contains("dropped Write report in done"), "{out}");
}

#[test]
fn items_of_a_list_with_a_delegated_click_listener_are_tree_items() {
    let Some(f) = fixture() else { return };
    let obs = f.open("deltree", "/dragtree.html");
    let src = line_with(&obs, "\"src\"");
    assert!(
        src.contains("treeitem \"src\"") && src.ends_with("has children, collapsed"),
        "{obs}"
    );
    let toml = line_with(&obs, "\"Cargo.toml\"");
    assert!(
        toml.contains("treeitem") && !toml.contains("children"),
        "{toml}"
    );
    // A list without a listener of its own stays text.
    assert!(
        element_lines(&obs)
            .iter()
            .all(|l| !l.contains("Not clickable")),
        "{obs}"
    );
    // The ref is the label: clicking it opens the folder (the page toggles the label's sibling).
    let out = f.ok("deltree", "browser_click", json!({"ref": ref_in(src)}));
    assert!(
        line_with(&out, "\"src\"").ends_with("has children, expanded"),
        "{out}"
    );
    let main = line_with(&out, "\"main.rs\"");
    assert!(main.contains("treeitem \"main.rs\""), "{out}");
    let lib = line_with(&out, "\"lib.rs\"");
    let out = f.ok("deltree", "browser_click", json!({"ref": ref_in(lib)}));
    assert!(out.contains("opened lib.rs"), "{out}");
}
