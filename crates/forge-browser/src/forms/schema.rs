//! [`FormSchema`]: a web form's structure as forge learned it (fields in order, the submit
//! control, a wizard's steps), its structural [`FormSchema::fingerprint`], the slug it is kept
//! under, and what changed between two learnings ([`FormSchema::changes`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The kind of a form field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldKind {
    /// A text input (also search, tel, url, password, time...: see `inputType`).
    Text,
    /// `<input type=email>`.
    Email,
    /// `<input type=number>` or `range`.
    Number,
    /// `<input type=date>`.
    Date,
    /// `<select>`.
    Select,
    /// A radio group (one field, its radios as options).
    Radio,
    /// A checkbox.
    Checkbox,
    /// `<textarea>`.
    Textarea,
    /// `<input type=file>`.
    File,
}

impl FieldKind {
    /// The kind's name as written in the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::Text => "text",
            FieldKind::Email => "email",
            FieldKind::Number => "number",
            FieldKind::Date => "date",
            FieldKind::Select => "select",
            FieldKind::Radio => "radio",
            FieldKind::Checkbox => "checkbox",
            FieldKind::Textarea => "textarea",
            FieldKind::File => "file",
        }
    }
}

/// One option of a select or a radio group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldOption {
    /// The value submitted.
    pub value: String,
    /// What the page shows.
    pub label: String,
    /// For a radio: the CSS selector of this radio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// One field of a form, in document order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormField {
    /// The row key it is filled from: its `name` (or id; `name[value]` for one checkbox of a
    /// group sharing a name).
    pub key: String,
    /// Its label (page text).
    pub label: String,
    /// Its kind.
    pub kind: FieldKind,
    /// Whether the page marks it required.
    #[serde(default)]
    pub required: bool,
    /// Select options and radios.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<FieldOption>,
    /// The input's own type when the kind does not say it (`tel`, `password`, `range`...).
    #[serde(default, rename = "inputType", skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    /// A multiple select or file input.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multiple: bool,
    /// A checkbox's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The `min` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    /// The `max` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    /// The `pattern` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The `maxlength` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxlength: Option<u64>,
    /// The `minlength` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minlength: Option<u64>,
    /// A file input's `accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// The wizard step it is in (0-based), when the form has steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The CSS selector forge fills it through.
    pub selector: String,
}

/// A button (the submit control, a step's next button).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// Its text.
    pub label: String,
    /// Its CSS selector.
    pub selector: String,
}

/// One step of a multi-step form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// 0-based.
    pub index: usize,
    /// Its heading or legend, if any.
    #[serde(default)]
    pub label: String,
    /// The button leading to the next step (None on the last).
    #[serde(default)]
    pub next: Option<Control>,
}

/// Which form of the page it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FormRef {
    /// The form's id attribute.
    #[serde(default)]
    pub id: String,
    /// Its name attribute.
    #[serde(default)]
    pub name: String,
    /// A CSS selector naming it.
    #[serde(default)]
    pub selector: String,
    /// Its index among the page's forms.
    #[serde(default)]
    pub index: usize,
}

/// A learned form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormSchema {
    /// The name it is kept under: `sites/{host}/forms/{slug}`.
    pub slug: String,
    /// The page's host (with a port when it has one).
    pub host: String,
    /// The page it was learned from (the form is opened there for each row).
    pub url: String,
    /// The page's title.
    #[serde(default)]
    pub title: String,
    /// Which form of the page.
    #[serde(default)]
    pub form: FormRef,
    /// Where it posts (resolved URL).
    #[serde(default)]
    pub action: String,
    /// `get` or `post`.
    #[serde(default)]
    pub method: String,
    /// The fields, in document order.
    pub fields: Vec<FormField>,
    /// The submit control.
    #[serde(default)]
    pub submit: Option<Control>,
    /// A wizard's steps (empty for a one-page form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// The structural fingerprint ([`FormSchema::compute_fingerprint`]).
    #[serde(default)]
    pub fingerprint: String,
}

impl FormSchema {
    /// The fingerprint of the form's structure: `sha256:` and 32 hex digits over the fields'
    /// keys, kinds, input types, required flags, options' values, constraints and steps, the
    /// submit control's presence, the method and the action (without its query). Labels and
    /// selectors are left out (wording and layout may change while the form stays the same),
    /// so learning the same form twice gives the same fingerprint.
    pub fn compute_fingerprint(&self) -> String {
        let mut h = Sha256::new();
        let mut put = |s: &str| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        let action = self.action.split(['?', '#']).next().unwrap_or("");
        put(action);
        put(&self.method);
        put(if self.submit.is_some() { "submit" } else { "-" });
        put(&self.steps.len().to_string());
        for f in &self.fields {
            put(&f.key);
            put(f.kind.as_str());
            put(f.input_type.as_deref().unwrap_or(""));
            put(if f.required { "r" } else { "o" });
            put(if f.multiple { "m" } else { "s" });
            for o in &f.options {
                put(&o.value);
            }
            put(&format!(
                "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
                f.min, f.max, f.pattern, f.maxlength, f.minlength, f.value, f.step
            ));
        }
        let digest = h.finalize();
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// What changed from `self` (the schema a batch runs on) to `now` (the form as the page has
    /// it), in words naming the fields: empty when the structure is the same.
    pub fn changes(&self, now: &FormSchema) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.fields {
            match now.fields.iter().find(|n| n.key == f.key) {
                None => out.push(format!("field `{}` is gone", f.key)),
                Some(n) => {
                    if n.kind != f.kind || n.input_type != f.input_type {
                        out.push(format!(
                            "field `{}` changed kind from {} to {}",
                            f.key,
                            f.kind.as_str(),
                            n.kind.as_str()
                        ));
                    }
                    if n.required != f.required {
                        out.push(format!(
                            "field `{}` is {} required",
                            f.key,
                            if n.required { "now" } else { "no longer" }
                        ));
                    }
                    let vals = |x: &FormField| -> Vec<String> {
                        x.options.iter().map(|o| o.value.clone()).collect()
                    };
                    if vals(n) != vals(f) {
                        out.push(format!("field `{}` has other options", f.key));
                    }
                    if (&n.min, &n.max, &n.pattern, &n.maxlength, &n.minlength)
                        != (&f.min, &f.max, &f.pattern, &f.maxlength, &f.minlength)
                    {
                        out.push(format!("field `{}` has other constraints", f.key));
                    }
                    if n.step != f.step {
                        out.push(format!("field `{}` moved to another step", f.key));
                    }
                }
            }
        }
        for n in &now.fields {
            if !self.fields.iter().any(|f| f.key == n.key) {
                out.push(format!("new field `{}` ({})", n.key, n.kind.as_str()));
            }
        }
        if self.submit.is_some() != now.submit.is_some() {
            out.push("the submit control changed".into());
        }
        if self.steps.len() != now.steps.len() {
            out.push(format!(
                "the form has {} steps, not {}",
                now.steps.len(),
                self.steps.len()
            ));
        }
        let strip = |a: &str| a.split(['?', '#']).next().unwrap_or("").to_string();
        if strip(&self.action) != strip(&now.action) || self.method != now.method {
            out.push(format!(
                "the form now posts to {} {} (was {} {})",
                now.method, now.action, self.method, self.action
            ));
        }
        if out.is_empty() && self.fingerprint != now.fingerprint {
            out.push("the form's structure changed".into());
        }
        out
    }
}

/// A slug from free text: lower-case letters, digits and `-`, at most 60 characters; `form`
/// when nothing is left.
pub fn slugify(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "form".into()
    } else {
        out
    }
}

/// Whether `slug` is a slug [`slugify`] could give (what a caller may name a schema by).
pub fn is_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= 60
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(key: &str, kind: FieldKind) -> FormField {
        FormField {
            key: key.into(),
            label: key.into(),
            kind,
            required: false,
            options: vec![],
            input_type: None,
            multiple: false,
            value: None,
            min: None,
            max: None,
            pattern: None,
            maxlength: None,
            minlength: None,
            accept: None,
            step: None,
            selector: format!("[name={key}]"),
        }
    }

    fn schema(fields: Vec<FormField>) -> FormSchema {
        let mut s = FormSchema {
            slug: "signup".into(),
            host: "127.0.0.1:8080".into(),
            url: "http://127.0.0.1:8080/signup".into(),
            title: "Sign up".into(),
            form: FormRef::default(),
            action: "http://127.0.0.1:8080/submit".into(),
            method: "post".into(),
            fields,
            submit: Some(Control {
                label: "Send".into(),
                selector: "button".into(),
            }),
            steps: vec![],
            fingerprint: String::new(),
        };
        s.fingerprint = s.compute_fingerprint();
        s
    }

    #[test]
    fn the_fingerprint_ignores_wording_and_names_a_renamed_field() {
        let a = schema(vec![
            field("email", FieldKind::Email),
            field("name", FieldKind::Text),
        ]);
        let mut reworded = a.clone();
        reworded.fields[0].label = "E-mail address".into();
        reworded.fields[0].selector = "#email".into();
        assert_eq!(a.fingerprint, reworded.compute_fingerprint());
        let b = schema(vec![
            field("email_address", FieldKind::Email),
            field("name", FieldKind::Text),
        ]);
        assert_ne!(a.fingerprint, b.fingerprint);
        let changes = a.changes(&b);
        assert_eq!(
            changes,
            vec![
                "field `email` is gone".to_string(),
                "new field `email_address` (email)".to_string()
            ]
        );
        assert!(a.changes(&reworded).is_empty());
    }

    #[test]
    fn slugs_are_plain() {
        assert_eq!(slugify("Sign Up / Step 1"), "sign-up-step-1");
        assert_eq!(slugify("///"), "form");
        assert!(is_slug("sign-up-step-1"));
        assert!(!is_slug("../etc"));
        assert!(!is_slug("Sign"));
    }
}
