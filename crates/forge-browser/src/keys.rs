//! Key parsing ([`KeyPress::parse`]: `Enter`, `Control+A`, `Shift+Tab`, a single character) and
//! dispatching one key press as real CDP key events ([`press_key`]).

use chromiumoxide::cdp::browser_protocol::input::{DispatchKeyEventParams, DispatchKeyEventType};
use chromiumoxide::Page;

use crate::error::{failed, invalid, R};

/// A key press: key name, code, virtual key code, text, modifiers and editing commands.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyPress {
    pub key: String,
    pub code: String,
    pub key_code: i64,
    pub text: Option<String>,
    pub modifiers: i64,
    pub commands: Vec<String>,
}

const ALT: i64 = 1;
const CTRL: i64 = 2;
const META: i64 = 4;
const SHIFT: i64 = 8;

impl KeyPress {
    /// A character typed as text.
    pub fn char(c: char) -> Self {
        let s = c.to_string();
        let def = chromiumoxide::keys::get_key_definition(&s);
        KeyPress {
            key: s.clone(),
            code: def.map(|d| d.code.to_string()).unwrap_or_default(),
            key_code: def.map(|d| d.key_code).unwrap_or(0),
            text: Some(s),
            modifiers: 0,
            commands: Vec::new(),
        }
    }

    /// A named key (`Enter`, `Backspace`, `a`) with `modifiers` (a CDP modifier bit set).
    pub(crate) fn named(name: &str, modifiers: i64) -> R<Self> {
        let def = chromiumoxide::keys::get_key_definition(name)
            .ok_or_else(|| invalid(format!("unknown key {name:?}; use names like Enter, Tab, Escape, Backspace, ArrowDown, PageDown, Home, F5, or a single character")))?;
        let printable = def
            .text
            .map(str::to_string)
            .or_else(|| (def.key.chars().count() == 1).then(|| def.key.to_string()));
        let text = if modifiers & (CTRL | META | ALT) != 0 {
            None
        } else {
            printable
        };
        Ok(KeyPress {
            key: def.key.to_string(),
            code: def.code.to_string(),
            key_code: def.key_code,
            text,
            modifiers,
            commands: Vec::new(),
        })
    }

    /// Whether this key only moves focus, the caret or the page, submits or deletes, and so can
    /// put no text into a field (typing, paste and every other key can).
    pub(crate) fn edits_nothing(&self) -> bool {
        matches!(
            self.key.as_str(),
            "Tab"
                | "Enter"
                | "Escape"
                | "ArrowUp"
                | "ArrowDown"
                | "ArrowLeft"
                | "ArrowRight"
                | "Home"
                | "End"
                | "PageUp"
                | "PageDown"
                | "Backspace"
                | "Delete"
        ) && self.commands.iter().all(|c| c != "paste")
    }

    /// Parse `Enter`, `a`, `Control+A`, `Shift+Tab`, `Control+Shift+ArrowLeft`.
    pub fn parse(spec: &str) -> R<Self> {
        let parts: Vec<&str> = if spec == "+" {
            vec!["+"]
        } else {
            spec.split('+').map(str::trim).collect()
        };
        let (last, mods) = parts.split_last().ok_or_else(|| invalid("empty key"))?;
        let mut m = 0;
        for p in mods {
            m |= match p.to_ascii_lowercase().as_str() {
                "control" | "ctrl" => CTRL,
                "shift" => SHIFT,
                "alt" | "option" => ALT,
                "meta" | "cmd" | "command" | "super" => META,
                other => {
                    return Err(invalid(format!(
                        "unknown modifier {other:?} in {spec:?}; use Control, Shift, Alt or Meta"
                    )))
                }
            };
        }
        let mut name = last.to_string();
        if name.chars().count() == 1 {
            let c = name.chars().next().unwrap_or(' ');
            if m & SHIFT != 0 {
                name = c.to_ascii_uppercase().to_string()
            } else if m & (CTRL | META | ALT) != 0 {
                name = c.to_ascii_lowercase().to_string()
            }
        } else {
            // Accept common spellings.
            name = match name.to_ascii_lowercase().as_str() {
                "esc" => "Escape".into(),
                "return" => "Enter".into(),
                "space" => " ".into(),
                "del" => "Delete".into(),
                "up" => "ArrowUp".into(),
                "down" => "ArrowDown".into(),
                "left" => "ArrowLeft".into(),
                "right" => "ArrowRight".into(),
                _ => name,
            };
        }
        let mut k = Self::named(&name, m)?;
        if m & (CTRL | META) != 0 {
            let cmd = match k.key.to_ascii_lowercase().as_str() {
                "a" => Some("selectAll"),
                "c" => Some("copy"),
                "x" => Some("cut"),
                "v" => Some("paste"),
                "z" if m & SHIFT != 0 => Some("redo"),
                "z" => Some("undo"),
                "y" => Some("redo"),
                _ => None,
            };
            k.commands = cmd.into_iter().map(str::to_string).collect();
        }
        Ok(k)
    }
}

/// Press and release `k` on `page` (key down with its text and editing commands, then key up).
pub(crate) async fn press_key(page: &Page, k: &KeyPress) -> R<()> {
    let mut down = DispatchKeyEventParams::builder()
        .r#type(if k.text.is_some() {
            DispatchKeyEventType::KeyDown
        } else {
            DispatchKeyEventType::RawKeyDown
        })
        .key(k.key.clone())
        .modifiers(k.modifiers);
    if !k.code.is_empty() {
        down = down.code(k.code.clone());
    }
    if k.key_code != 0 {
        down = down
            .windows_virtual_key_code(k.key_code)
            .native_virtual_key_code(k.key_code);
    }
    if let Some(t) = &k.text {
        down = down.text(t.clone()).unmodified_text(t.clone());
    }
    if !k.commands.is_empty() {
        down = down.commands(k.commands.clone());
    }
    page.execute(down.build().map_err(failed)?).await?;
    let mut up = DispatchKeyEventParams::builder()
        .r#type(DispatchKeyEventType::KeyUp)
        .key(k.key.clone())
        .modifiers(k.modifiers);
    if !k.code.is_empty() {
        up = up.code(k.code.clone());
    }
    if k.key_code != 0 {
        up = up
            .windows_virtual_key_code(k.key_code)
            .native_virtual_key_code(k.key_code);
    }
    page.execute(up.build().map_err(failed)?).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_chords_parse() {
        let k = KeyPress::parse("Control+A").expect("chord");
        assert_eq!(
            (k.key.as_str(), k.modifiers, k.text.clone()),
            ("a", CTRL, None)
        );
        assert_eq!(k.commands, vec!["selectAll".to_string()]);
        let e = KeyPress::parse("Enter").expect("enter");
        assert_eq!((e.key_code, e.text.as_deref()), (13, Some("\r")));
        let t = KeyPress::parse("Shift+Tab").expect("shift tab");
        assert_eq!((t.key.as_str(), t.modifiers), ("Tab", SHIFT));
        assert!(KeyPress::parse("Hyper+Q").is_err());
        assert!(KeyPress::parse("NotAKey").is_err());
    }
}
