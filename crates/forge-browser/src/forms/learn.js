// forge's form inspector: run in forge's isolated world (never the page's), read-only. Given
// `args.hint` (a form's id, name, CSS selector or 0-based index; optional), it returns the form's
// structure: fields in document order, the submit control, steps of a wizard, the action.
// Nothing on the page is changed (no clicks, no focus, no values).
(function (args) {
  const clip = (s, n) => { s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim(); return s.length > n ? s.slice(0, n) : s; };
  const esc = (s) => (globalThis.CSS && CSS.escape) ? CSS.escape(s) : String(s).replace(/["\\]/g, '\\$&');
  const SKIP = ['hidden', 'submit', 'button', 'reset', 'image'];
  const NEXT = /^\s*(next|continue|weiter|suivant|siguiente|avanti|volgende|proceed|next step)\b|^\s*[→>]+\s*$/i;
  const forms = Array.from(document.forms);
  const fieldCount = (f) => Array.from(f.elements).filter((e) => e.tagName !== 'BUTTON' && e.tagName !== 'FIELDSET' && !SKIP.includes((e.type || '').toLowerCase())).length;
  let form = null;
  const hint = args && typeof args.hint === 'string' ? args.hint.trim() : '';
  if (hint) {
    if (/^\d+$/.test(hint)) form = forms[Number(hint)] || null;
    if (!form) form = forms.find((f) => f.id === hint || f.getAttribute('name') === hint) || null;
    if (!form) {
      let m = null;
      try { m = document.querySelector(hint); } catch (_) { m = null; }
      if (m && m.tagName === 'FORM') form = m;
      else if (m && m.closest) form = m.closest('form');
    }
    if (!form) return { error: 'no-form', hint, forms: forms.map(describeForm) };
  } else {
    const ranked = forms.slice().sort((a, b) => fieldCount(b) - fieldCount(a));
    form = ranked[0] || null;
    if (!form) return { error: 'no-form', hint: '', forms: [] };
  }

  function describeForm(f) {
    return { id: f.id || '', name: f.getAttribute('name') || '', fields: fieldCount(f) };
  }

  // A selector naming the form: its id, else its position among the document's forms.
  const formSel = form.id && document.querySelectorAll('#' + esc(form.id)).length === 1
    ? 'form#' + esc(form.id)
    : 'form:nth-of-type(' + (Array.from(document.querySelectorAll('form')).filter((f) => f.parentElement === form.parentElement).indexOf(form) + 1) + ')';
  const formSelector = document.querySelector(formSel) === form ? formSel : null;
  const within = (sel) => formSelector ? formSelector + ' ' + sel : sel;

  function labelOf(el) {
    const byAria = el.getAttribute('aria-label');
    if (byAria) return clip(byAria, 120);
    const lb = el.getAttribute('aria-labelledby');
    if (lb) {
      const t = lb.split(/\s+/).map((id) => { const n = document.getElementById(id); return n ? n.textContent : ''; }).join(' ');
      if (clip(t, 120)) return clip(t, 120);
    }
    if (el.labels && el.labels.length) {
      // The label's own text, without the text of controls inside it.
      const l = el.labels[0];
      let t = '';
      const walk = (n) => {
        for (const c of n.childNodes) {
          if (c.nodeType === 3) t += c.textContent + ' ';
          else if (c.nodeType === 1 && !['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON'].includes(c.tagName)) walk(c);
        }
      };
      walk(l);
      if (clip(t, 120)) return clip(t, 120);
    }
    const ph = el.getAttribute('placeholder');
    if (ph) return clip(ph, 120);
    const title = el.getAttribute('title');
    return title ? clip(title, 120) : '';
  }

  function kindOf(el) {
    if (el.tagName === 'SELECT') return 'select';
    if (el.tagName === 'TEXTAREA') return 'textarea';
    const t = (el.type || 'text').toLowerCase();
    if (t === 'email') return 'email';
    if (t === 'number' || t === 'range') return 'number';
    if (t === 'date') return 'date';
    if (t === 'radio') return 'radio';
    if (t === 'checkbox') return 'checkbox';
    if (t === 'file') return 'file';
    return 'text';
  }

  function selectorOf(el) {
    if (el.id && document.querySelectorAll('#' + esc(el.id)).length === 1) return '#' + esc(el.id);
    const name = el.getAttribute('name');
    if (name) {
      const s = within(el.tagName.toLowerCase() + '[name="' + esc(name) + '"]');
      const all = document.querySelectorAll(s);
      if (all.length === 1 && all[0] === el) return s;
      if (el.type === 'radio' || el.type === 'checkbox') {
        const sv = s + '[value="' + esc(el.value) + '"]';
        const m = document.querySelectorAll(sv);
        if (m.length === 1 && m[0] === el) return sv;
      }
    }
    // A positional path from the form.
    const parts = [];
    for (let n = el, i = 0; n && n !== form && n.nodeType === 1 && i < 32; n = n.parentElement, i++) {
      const p = n.parentElement;
      const idx = p ? Array.from(p.children).filter((c) => c.tagName === n.tagName).indexOf(n) + 1 : 1;
      parts.unshift(n.tagName.toLowerCase() + ':nth-of-type(' + idx + ')');
    }
    return within(parts.join(' > '));
  }

  const num = (v) => (v === '' || v == null) ? null : v;
  const fields = [];
  const radios = new Map();
  const checkNames = {};
  for (const el of form.elements) {
    if (el.type === 'checkbox' && el.name) checkNames[el.name] = (checkNames[el.name] || 0) + 1;
  }
  for (const el of form.elements) {
    if (el.tagName === 'FIELDSET' || el.tagName === 'BUTTON' || el.tagName === 'OUTPUT' || el.tagName === 'OBJECT') continue;
    const type = (el.type || '').toLowerCase();
    if (SKIP.includes(type)) continue;
    const kind = kindOf(el);
    if (kind === 'radio') {
      const name = el.name || el.id;
      let f = radios.get(name);
      if (!f) {
        const group = el.closest('fieldset');
        const legend = group && group.querySelector('legend');
        f = { key: name, label: legend ? clip(legend.textContent, 120) : '', kind, required: false, options: [], selector: within('input[type="radio"][name="' + esc(name) + '"]'), el };
        radios.set(name, f);
        fields.push(f);
      }
      if (el.required) f.required = true;
      f.options.push({ value: el.value, label: labelOf(el) || el.value, selector: selectorOf(el) });
      continue;
    }
    let key = el.getAttribute('name') || el.id || '';
    if (kind === 'checkbox' && el.name && checkNames[el.name] > 1) key = el.name + '[' + el.value + ']';
    if (!key) key = clip(labelOf(el), 40).toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '') || ('field' + (fields.length + 1));
    const f = { key, label: labelOf(el), kind, required: !!el.required, selector: selectorOf(el), el };
    if (type && kind === 'text' && type !== 'text') f.inputType = type;
    if (kind === 'number' && type === 'range') f.inputType = 'range';
    if (kind === 'select') {
      f.options = Array.from(el.options).map((o) => ({ value: o.value, label: clip(o.label || o.text, 120) }));
      if (el.multiple) f.multiple = true;
    }
    if (kind === 'checkbox') f.value = el.value;
    if (el.min !== undefined && num(el.getAttribute('min')) !== null) f.min = el.getAttribute('min');
    if (num(el.getAttribute('max')) !== null) f.max = el.getAttribute('max');
    if (num(el.getAttribute('pattern')) !== null) f.pattern = el.getAttribute('pattern');
    if (typeof el.maxLength === 'number' && el.maxLength >= 0 && el.hasAttribute('maxlength')) f.maxlength = el.maxLength;
    if (typeof el.minLength === 'number' && el.minLength > 0) f.minlength = el.minLength;
    if (kind === 'file' && el.multiple) f.multiple = true;
    if (kind === 'file' && el.accept) f.accept = el.accept;
    fields.push(f);
  }

  // The submit control: the form's submit buttons, the last one in document order (a wizard's
  // is in its last step). Buttons outside the form naming it (form="id") count too.
  const submits = Array.from(form.elements).filter((e) => (e.tagName === 'BUTTON' && (e.getAttribute('type') || 'submit').toLowerCase() === 'submit') || (e.tagName === 'INPUT' && ['submit', 'image'].includes((e.type || '').toLowerCase())));
  const submitEl = submits[submits.length - 1] || null;
  const textOf = (b) => clip(b.tagName === 'INPUT' ? (b.value || b.alt || '') : (b.textContent || b.getAttribute('aria-label') || ''), 80);
  const submit = submitEl ? { label: textOf(submitEl), selector: selectorOf(submitEl) } : null;

  // Steps: a wizard's next buttons (type=button, or links) whose words say next/continue; each
  // step is the part of the form that holds one next button (its container directly under the
  // form's common wrapper), the last step the part holding the submit control.
  const nexts = Array.from(form.querySelectorAll('button, input[type="button"], a[href], [role="button"]'))
    .filter((b) => b !== submitEl && !submits.includes(b) && NEXT.test(textOf(b)));
  let steps = [];
  if (nexts.length) {
    // The element under which the steps are siblings: descend from the form while it has one
    // element child.
    let root = form;
    for (let i = 0; i < 8 && root.children.length === 1; i++) root = root.children[0];
    const partOf = (el) => { let n = el; while (n && n.parentElement !== root) n = n.parentElement; return n; };
    const parts = [];
    for (const c of root.children) {
      if (fields.some((f) => c.contains(f.el)) || nexts.some((b) => c.contains(b))) parts.push(c);
    }
    if (parts.length >= 2) {
      steps = parts.map((p, i) => {
        const next = nexts.find((b) => partOf(b) === p);
        return { index: i, label: clip((p.querySelector('legend, h1, h2, h3, h4') || {}).textContent || '', 80), next: next ? { label: textOf(next), selector: selectorOf(next) } : null };
      });
      for (const f of fields) {
        const p = partOf(f.el);
        const i = parts.indexOf(p);
        f.step = i < 0 ? 0 : i;
      }
    }
  }
  const out = fields.map((f) => { const c = Object.assign({}, f); delete c.el; return c; });
  let action = '';
  try { action = new URL(form.getAttribute('action') || location.href, location.href).href; } catch (_) { action = ''; }
  return {
    url: location.href,
    title: clip(document.title, 200),
    form: { id: form.id || '', name: form.getAttribute('name') || '', selector: formSelector || '', index: forms.indexOf(form) },
    action,
    method: (form.getAttribute('method') || 'get').toLowerCase(),
    fields: out,
    submit,
    steps,
    forms: forms.length,
  };
})
