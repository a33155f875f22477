//! One clipboard per session. Chromium has a single clipboard for all its browser contexts, so
//! text copied in one forge session could be pasted in another; separate tasks must not share
//! state (design rule 5). forge therefore keeps each session's clipboard itself
//! (`SessionState::clipboard`) and lets Chromium's clipboard hold a session's text only while
//! that session copies or pastes, with `Running::clipboard` locked:
//!
//! - copy / cut (`Control+C`, `Control+X`, `Control+Insert`, `Shift+Delete`): forge arms a
//!   one-shot listener in its isolated world ([`arm`]), the real key runs (the page sees its
//!   trusted `copy`/`cut` event and may change what is copied; a cut deletes the selection), the
//!   listener's record of what was copied becomes the session's clipboard ([`take`]), and
//!   Chromium's clipboard is overwritten with an empty text ([`put`] of "").
//! - paste (`Control+V`, `Shift+Insert`): forge writes the session's own clipboard into
//!   Chromium's ([`put`]), the real key runs (the page sees a trusted `paste` event with that
//!   text), and Chromium's clipboard is emptied again. If the write fails, the paste is refused
//!   rather than pasting whatever Chromium's clipboard holds.
//!
//! The write is a `copy` command run in forge's world with a user gesture, whose `beforecopy` and
//! `copy` events forge's capturing listeners on the window stop, so the page's listeners on its
//! elements and document never see a copy it did not ask for (only a capturing listener the page
//! put on the window before forge's comes first).

use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::Page;
use serde_json::Value;

use crate::error::{failed, R};
use crate::keys::KeyPress;

/// What a key does with the clipboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClipOp {
    Copy,
    Cut,
    Paste,
}

const CTRL_OR_META: i64 = 2 | 4;
const SHIFT: i64 = 8;

/// The clipboard operation `k` performs, if any (its editing command, or the Insert/Delete
/// chords Chromium maps to copy, paste and cut).
pub(crate) fn op_of(k: &KeyPress) -> Option<ClipOp> {
    for c in &k.commands {
        match c.as_str() {
            "copy" => return Some(ClipOp::Copy),
            "cut" => return Some(ClipOp::Cut),
            "paste" => return Some(ClipOp::Paste),
            _ => {}
        }
    }
    match k.key.as_str() {
        "Insert" if k.modifiers & CTRL_OR_META != 0 => Some(ClipOp::Copy),
        "Insert" if k.modifiers & SHIFT != 0 => Some(ClipOp::Paste),
        "Delete" if k.modifiers & SHIFT != 0 && k.modifiers & CTRL_OR_META == 0 => {
            Some(ClipOp::Cut)
        }
        _ => None,
    }
}

/// The selected text where the user would copy from: the focused field's selected part, else the
/// document's selection (through open shadow roots).
const SELECTED: &str = r#"function () {
  let a = document.activeElement;
  while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
  if (a && (a instanceof HTMLTextAreaElement || a instanceof HTMLInputElement)) {
    try {
      const s = a.selectionStart, e = a.selectionEnd;
      if (typeof s === 'number' && typeof e === 'number') return a.value.slice(s, e);
    } catch (_) {}
  }
  const sel = getSelection();
  return sel ? sel.toString() : '';
}"#;

/// Evaluate `expr` in forge's isolated world of `page`'s top document, as a user gesture when
/// `gesture` (a `copy` command from script needs one).
async fn eval(page: &Page, expr: String, gesture: bool) -> R<Value> {
    let ctx = crate::observe::isolated_context(page).await?;
    let params = EvaluateParams::builder()
        .expression(expr)
        .context_id(ctx)
        .return_by_value(true)
        .user_gesture(gesture)
        .silent(true)
        .build()
        .map_err(failed)?;
    let resp = page.execute(params).await?;
    if let Some(ex) = &resp.result.exception_details {
        return Err(failed(format!(
            "the clipboard step failed in the page ({}); the key was not pressed or its copy was not kept",
            ex.text
        )));
    }
    Ok(resp.result.result.value.clone().unwrap_or(Value::Null))
}

/// Before a copy/cut key: listen (once) for the `copy`/`cut` event it fires. Capturing: the
/// selection before the page's handlers run; bubbling (after the page's handlers on the way):
/// what the page put on the clipboard if it took over the copy, else the selection.
pub(crate) async fn arm(page: &Page) -> R<()> {
    let expr = format!(
        r#"(() => {{
  const selected = {SELECTED};
  if (globalThis.__forgeClipOff) globalThis.__forgeClipOff();
  const rec = {{ text: null, early: null }};
  const early = () => {{ if (rec.early === null) rec.early = selected(); }};
  const late = (e) => {{
    let t = null;
    if (e.defaultPrevented) {{
      try {{ t = e.clipboardData ? e.clipboardData.getData('text/plain') : ''; }} catch (_) {{ t = ''; }}
    }} else {{
      t = selected();
    }}
    rec.text = t;
  }};
  for (const k of ['copy', 'cut']) {{
    addEventListener(k, early, true);
    addEventListener(k, late, false);
  }}
  globalThis.__forgeClipRec = rec;
  globalThis.__forgeClipOff = () => {{
    for (const k of ['copy', 'cut']) {{
      removeEventListener(k, early, true);
      removeEventListener(k, late, false);
    }}
    globalThis.__forgeClipOff = null;
  }};
  return true;
}})()"#
    );
    eval(page, expr, false).await?;
    Ok(())
}

/// After a copy/cut key: what it copied (None when no copy event reached the top document, e.g.
/// the focus was in a cross-origin frame or the page stopped the event before the window), and
/// the listener removed.
pub(crate) async fn take(page: &Page) -> R<Option<String>> {
    let v = eval(
        page,
        r#"(() => {
  const r = globalThis.__forgeClipRec;
  globalThis.__forgeClipRec = null;
  if (globalThis.__forgeClipOff) globalThis.__forgeClipOff();
  if (!r) return null;
  return r.text !== null ? r.text : r.early;
})()"#
            .to_string(),
        false,
    )
    .await?;
    Ok(v.as_str().map(str::to_string))
}

/// Make Chromium's clipboard hold exactly `text` (plain text; "" empties it). Fails when the
/// write did not happen (e.g. the focus is in a password field, where Chromium refuses copies).
pub(crate) async fn put(page: &Page, text: &str) -> R<()> {
    let lit = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
    let expr = format!(
        r#"(() => {{
  let wrote = false;
  const before = (e) => {{ e.preventDefault(); e.stopImmediatePropagation(); }};
  const copy = (e) => {{
    e.stopImmediatePropagation();
    e.preventDefault();
    if (e.clipboardData) {{ e.clipboardData.setData('text/plain', {lit}); wrote = true; }}
  }};
  addEventListener('beforecopy', before, true);
  addEventListener('copy', copy, true);
  try {{ document.execCommand('copy'); }} finally {{
    removeEventListener('beforecopy', before, true);
    removeEventListener('copy', copy, true);
  }}
  return wrote;
}})()"#
    );
    let v = eval(page, expr, true).await?;
    if v.as_bool() != Some(true) {
        return Err(failed(
            "forge could not set the browser clipboard to this session's own clipboard (Chromium refused the write, e.g. because the focus is in a password field), so it did not paste: pasting would have used whatever another session left there. Focus a normal field and try again, or type the text with browser_fill",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipboard_keys_are_recognised() {
        let op = |s: &str| op_of(&KeyPress::parse(s).expect("key"));
        assert_eq!(op("Control+C"), Some(ClipOp::Copy));
        assert_eq!(op("Meta+c"), Some(ClipOp::Copy));
        assert_eq!(op("Control+X"), Some(ClipOp::Cut));
        assert_eq!(op("Control+V"), Some(ClipOp::Paste));
        assert_eq!(op("Control+Shift+V"), Some(ClipOp::Paste));
        assert_eq!(op("Control+Insert"), Some(ClipOp::Copy));
        assert_eq!(op("Shift+Insert"), Some(ClipOp::Paste));
        assert_eq!(op("Shift+Delete"), Some(ClipOp::Cut));
        assert_eq!(op("Delete"), None);
        assert_eq!(op("Control+A"), None);
        assert_eq!(op("v"), None);
    }
}
