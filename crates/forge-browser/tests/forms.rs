//! `browser_form_learn` for real: Chromium through the real egress proxy reads a loopback form
//! with every field kind, a select, a radio group, required fields, a pattern and a two-step
//! wizard, read-only, in forge's isolated world.

use std::sync::OnceLock;

use forge_browser::forms::{form_tools, FieldKind, FormSchema, LEARN_TOOL, ROW_TOOL};
use forge_browser::BrowserToolOptions;
use forge_testkit::browser::*;
use forge_testkit::site::{Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    server: Site,
}

/// Every kind of field, a radio group, a select, required fields, a pattern and two steps (the
/// second hidden until "Next" is clicked). Its script renames nothing; `/changed` has the email
/// field renamed. A page script that tries to spoof what forge reads (overriding
/// `document.forms` and `HTMLFormElement.prototype.elements` in the page's world) must not matter.
const WIZARD: &str = r#"<!doctype html><html><head><title>Sign up</title></head><body>
<h1>Sign up</h1>
<form id="signup" action="/submit" method="post">
  <fieldset id="step1"><legend>About you</legend>
    <label for="name">Full name</label> <input id="name" name="name" required maxlength="40">
    <label>Email <input type="email" name="EMAIL_NAME" required></label>
    <label for="age">Age</label> <input id="age" type="number" name="age" min="18" max="99">
    <label for="born">Born</label> <input id="born" type="date" name="born">
    <label for="zip">Postcode</label> <input id="zip" name="zip" pattern="[0-9]{5}">
    <button type="button" id="next1" onclick="step1.hidden=true;step2.hidden=false">Next</button>
  </fieldset>
  <fieldset id="step2" hidden><legend>Preferences</legend>
    <label for="plan">Plan</label>
    <select id="plan" name="plan"><option value="">Choose…</option><option value="basic">Basic</option><option value="pro">Pro plan</option></select>
    <fieldset><legend>Contact by</legend>
      <label><input type="radio" name="contact" value="mail" required> Mail</label>
      <label><input type="radio" name="contact" value="phone"> Phone</label>
    </fieldset>
    <label><input type="checkbox" name="terms" value="yes" required> I accept the terms</label>
    <label for="notes">Notes</label> <textarea id="notes" name="notes"></textarea>
    <label for="cv">CV</label> <input id="cv" type="file" name="cv">
    <input type="hidden" name="csrf" value="token-123">
    <button type="submit">Create account</button>
  </fieldset>
</form>
<script>
Object.defineProperty(document, 'forms', { get() { return []; } });
Object.defineProperty(HTMLFormElement.prototype, 'elements', { get() { return []; } });
</script>
</body></html>"#;

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|req| {
            let path = req.path.split('?').next().unwrap_or("").to_string();
            match path.as_str() {
                "/signup" => Response::html(WIZARD.replace("EMAIL_NAME", "email")),
                "/changed" => Response::html(WIZARD.replace("EMAIL_NAME", "email_address")),
                "/two" => Response::html(
                    r#"<!doctype html><title>Two</title>
<form id="search" action="/s"><input name="q"><button>Go</button></form>
<form name="contact" action="/c" method="post"><input name="who" required><input type="email" name="mail"><button>Send</button></form>"#,
                ),
                "/submit" if req.method == "POST" => Response::html(
                    "<!doctype html><title>Thanks</title><p class=success>Account created</p>",
                ),
                "/none" => Response::html("<!doctype html><title>None</title><p>No form here</p>"),
                _ => Response::not_found(),
            }
        });
        let b = Shared::start("forms", &[server.entry()], Confine::No)?;
        Some(Fixture { b, server })
    })
    .as_ref()
}

impl Fixture {
    fn learn(&self, session: &str, input: Value) -> Result<FormSchema, ToolError> {
        let tool = form_tools(self.b.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == LEARN_TOOL)
            .expect("the learn tool");
        let ctx = self.b.context(session);
        let out = self.b.rt.block_on(tool.execute(&ctx, input))?;
        let data = out.data.expect("the schema as data");
        Ok(serde_json::from_value(data).expect("a FormSchema"))
    }

    fn row(&self, session: &str, schema: &FormSchema, row: Value) -> Value {
        let tool = form_tools(self.b.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == ROW_TOOL)
            .expect("the row tool");
        let ctx = self.b.context(session);
        let out = self
            .b
            .rt
            .block_on(tool.execute(&ctx, json!({"schema": schema, "row": row})))
            .expect("a row ends with an outcome");
        out.data.expect("the outcome as data")
    }

    /// The bodies of the form posts the site received.
    fn posts(&self) -> Vec<String> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == "/submit")
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }
}

#[test]
fn a_wizard_with_every_kind_is_learned_field_by_field_and_twice_the_same() {
    let Some(f) = fixture() else { return };
    let url = f.server.url("/signup");
    let s = f.learn("learn-1", json!({"url": url})).expect("learned");
    assert_eq!(s.slug, "signup");
    assert_eq!(s.host, f.server.entry());
    assert_eq!(s.method, "post");
    assert_eq!(s.action, f.server.url("/submit"));
    let keys: Vec<(&str, FieldKind)> = s.fields.iter().map(|x| (x.key.as_str(), x.kind)).collect();
    assert_eq!(
        keys,
        vec![
            ("name", FieldKind::Text),
            ("email", FieldKind::Email),
            ("age", FieldKind::Number),
            ("born", FieldKind::Date),
            ("zip", FieldKind::Text),
            ("plan", FieldKind::Select),
            ("contact", FieldKind::Radio),
            ("terms", FieldKind::Checkbox),
            ("notes", FieldKind::Textarea),
            ("cv", FieldKind::File),
        ],
        "{s:#?}"
    );
    let by = |k: &str| s.fields.iter().find(|x| x.key == k).expect(k);
    assert_eq!(by("name").label, "Full name");
    assert!(by("name").required);
    assert_eq!(by("name").maxlength, Some(40));
    assert_eq!(by("email").label, "Email");
    assert!(by("email").required);
    assert_eq!(by("age").min.as_deref(), Some("18"));
    assert_eq!(by("age").max.as_deref(), Some("99"));
    assert!(!by("age").required);
    assert_eq!(by("zip").pattern.as_deref(), Some("[0-9]{5}"));
    let plan: Vec<(&str, &str)> = by("plan")
        .options
        .iter()
        .map(|o| (o.value.as_str(), o.label.as_str()))
        .collect();
    assert_eq!(
        plan,
        vec![("", "Choose…"), ("basic", "Basic"), ("pro", "Pro plan")]
    );
    let contact = by("contact");
    assert_eq!(contact.label, "Contact by");
    assert!(contact.required);
    let radios: Vec<(&str, &str)> = contact
        .options
        .iter()
        .map(|o| (o.value.as_str(), o.label.as_str()))
        .collect();
    assert_eq!(radios, vec![("mail", "Mail"), ("phone", "Phone")]);
    assert_eq!(by("terms").value.as_deref(), Some("yes"));
    assert_eq!(by("terms").label, "I accept the terms");
    // The hidden field is not a field to fill; the submit control is the wizard's last button.
    assert!(s.fields.iter().all(|x| x.key != "csrf"));
    let submit = s.submit.as_ref().expect("a submit control");
    assert_eq!(submit.label, "Create account");
    // Two steps: the first with its Next button, the second with the rest.
    assert_eq!(s.steps.len(), 2, "{s:#?}");
    assert_eq!(s.steps[0].label, "About you");
    assert_eq!(
        s.steps[0].next.as_ref().map(|n| n.label.as_str()),
        Some("Next")
    );
    assert!(s.steps[1].next.is_none());
    for k in ["name", "email", "age", "born", "zip"] {
        assert_eq!(by(k).step, Some(0), "{k}");
    }
    for k in ["plan", "contact", "terms", "notes", "cv"] {
        assert_eq!(by(k).step, Some(1), "{k}");
    }
    assert!(s.fingerprint.starts_with("sha256:"));

    // Learning again (a fresh load, another session) gives the same fingerprint.
    let again = f
        .learn("learn-2", json!({"url": url}))
        .expect("learned again");
    assert_eq!(again.fingerprint, s.fingerprint);
    assert_eq!(again, s);

    // The renamed field changes the fingerprint, and the change names it.
    let changed = f
        .learn(
            "learn-3",
            json!({"url": f.server.url("/changed"), "slug": "signup"}),
        )
        .expect("learned the changed form");
    assert_ne!(changed.fingerprint, s.fingerprint);
    let what = s.changes(&changed);
    assert!(
        what.contains(&"field `email` is gone".to_string()),
        "{what:?}"
    );
    assert!(
        what.contains(&"new field `email_address` (email)".to_string()),
        "{what:?}"
    );
}

#[test]
fn the_form_hint_picks_one_of_several_and_a_page_without_forms_says_so() {
    let Some(f) = fixture() else { return };
    let url = f.server.url("/two");
    let s = f
        .learn("hint-1", json!({"url": url, "form": "contact"}))
        .expect("learned");
    assert_eq!(s.slug, "contact");
    let keys: Vec<&str> = s.fields.iter().map(|x| x.key.as_str()).collect();
    assert_eq!(keys, vec!["who", "mail"]);
    assert_eq!(s.submit.as_ref().map(|c| c.label.as_str()), Some("Send"));
    let s = f
        .learn("hint-2", json!({"url": url, "form": "0"}))
        .expect("learned");
    assert_eq!(s.slug, "search");
    let err = f
        .learn("hint-3", json!({"url": url, "form": "#nope"}))
        .expect_err("no such form");
    assert!(
        err.to_string().contains("no form matches \"#nope\""),
        "{err}"
    );
    let err = f
        .learn("hint-4", json!({"url": f.server.url("/none")}))
        .expect_err("no form");
    assert!(err.to_string().contains("has no <form> element"), "{err}");
    let err = f
        .learn("hint-5", json!({"url": url, "slug": "../x"}))
        .expect_err("a bad slug");
    assert!(err.to_string().contains("is not a slug"), "{err}");
}

#[test]
fn a_row_goes_through_both_steps_and_invalid_or_changed_rows_are_not_sent() {
    let Some(f) = fixture() else { return };
    let s = f
        .learn("row-learn", json!({"url": f.server.url("/signup")}))
        .expect("learned");
    let before = f.posts().len();
    let ok = f.row(
        "row-1",
        &s,
        json!({"name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "born": "1815-12-10",
               "zip": "12345", "plan": "pro", "contact": "phone", "terms": true, "notes": "two\nlines"}),
    );
    assert_eq!(ok["status"], "done", "{ok}");
    assert_eq!(ok["sent"], true);
    let posts = f.posts();
    assert_eq!(posts.len(), before + 1, "one submission");
    let body = posts.last().expect("the post");
    for part in [
        "name=Ada+Lovelace",
        "email=ada%40example.org",
        "age=36",
        "born=1815-12-10",
        "zip=12345",
        "plan=pro",
        "contact=phone",
        "terms=yes",
        "notes=two%0D%0Alines",
        "csrf=token-123",
    ] {
        assert!(body.contains(part), "{part} in {body}");
    }
    // A postcode against the pattern: the browser keeps the form, with its own message.
    let bad = f.row(
        "row-2",
        &s,
        json!({"name": "Bad Zip", "email": "b@example.org", "zip": "12", "contact": "mail", "terms": "yes"}),
    );
    assert_eq!(bad["status"], "failed", "{bad}");
    assert_eq!(bad["sent"], false);
    let msg = bad["message"].as_str().unwrap_or("");
    assert!(msg.contains("zip: "), "{msg}");
    assert_eq!(
        f.posts().len(),
        before + 1,
        "nothing sent for the invalid row"
    );
    // The form changed (email renamed): nothing is filled or sent, and the change is named.
    let mut moved = s.clone();
    moved.url = f.server.url("/changed");
    let changed = f.row(
        "row-3",
        &moved,
        json!({"name": "X", "email": "x@example.org"}),
    );
    assert_eq!(changed["status"], "changed", "{changed}");
    assert!(
        changed["message"]
            .as_str()
            .unwrap_or("")
            .contains("field `email` is gone"),
        "{changed}"
    );
    assert_eq!(f.posts().len(), before + 1);
}
