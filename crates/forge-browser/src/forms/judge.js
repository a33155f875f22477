// After a form row's submit: what the page says, read in forge's isolated world. `args.form`:
// the form's selector ('' for the page's first form); `args.fields`: [{key, selector}] that were
// filled. Returns the time origin of the document (a new one means the submit navigated), the
// fields the browser holds invalid (with its validation message), alert/status messages, and
// whether every filled field is empty again (the form was reset).
(function (args) {
  const clip = (s, n) => { s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim(); return s.length > n ? s.slice(0, n) + '…' : s; };
  const visible = (el) => { const r = el.getBoundingClientRect(); const cs = getComputedStyle(el); return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none'; };
  let form = null;
  try { form = args.form ? document.querySelector(args.form) : document.forms[0]; } catch (_) { form = null; }
  const invalid = [];
  if (form && !form.noValidate) {
    for (const f of args.fields || []) {
      let el = null;
      try { el = document.querySelector(f.selector); } catch (_) { el = null; }
      if (el && el.willValidate && !el.checkValidity()) invalid.push({ key: f.key, message: clip(el.validationMessage, 200) });
    }
  }
  const alerts = [];
  const seen = new Set();
  const ERR = /(^|[\s_-])(error|errors|invalid|danger|failure|failed|is-invalid)([\s_-]|$)/i;
  const OK = /(^|[\s_-])(success|succeeded|thanks|thank-you|confirmation|done)([\s_-]|$)/i;
  for (const el of document.querySelectorAll('[role="alert"], [role="status"], [aria-live], .error, .errors, .invalid-feedback, .field-error, .alert, .success, .notice, .message, output')) {
    if (seen.has(el) || !visible(el)) continue;
    const text = clip(el.textContent, 300);
    if (!text) continue;
    seen.add(el);
    const cls = (el.getAttribute('class') || '') + ' ' + (el.id || '');
    const kind = (el.getAttribute('role') === 'alert' || ERR.test(cls)) ? 'error' : (OK.test(cls) || el.getAttribute('role') === 'status') ? 'success' : 'info';
    alerts.push({ kind, text });
    if (alerts.length >= 10) break;
  }
  let reset = (args.fields || []).length > 0;
  for (const f of args.fields || []) {
    let el = null;
    try { el = document.querySelector(f.selector); } catch (_) { el = null; }
    if (!el) { reset = false; break; }
    const empty = (el.type === 'checkbox' || el.type === 'radio') ? !el.checked : (el.tagName === 'SELECT' ? el.selectedIndex <= 0 : el.value === '');
    if (!empty) { reset = false; break; }
  }
  return { origin: performance.timeOrigin, url: location.href, title: clip(document.title, 120), invalid, alerts, reset, form: !!form };
})
