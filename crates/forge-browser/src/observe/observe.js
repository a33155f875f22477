// forge page library. Runs only in forge's isolated world (Page.createIsolatedWorld), never in
// the page's world: page scripts cannot see it, and the built-ins it uses (Array, Map, DOM
// prototypes) are this world's own, so a page that clobbers its prototypes cannot change what it
// reports. Evaluated as an expression that yields the library object.
(() => {
  'use strict';
  const S = {
    refOf: new WeakMap(),   // Element -> ref number
    byRef: new Map(),       // ref number -> WeakRef<Element>
    next: 1,
    frameOf: new WeakMap(), // iframe element -> frame number
    frameEls: new Map(),    // frame number -> WeakRef<iframe element>
    nextFrame: 1,
    clickers: new WeakSet(),
  };

  // (SVG's own elements keep their lower-case names: an <svg><title> is not page text.)
  // Schemes a web page's frame can show (anything else Chromium refuses to load into it).
  const FRAME_SCHEMES = new Set(['http:', 'https:', 'about:', 'data:', 'blob:', 'javascript:']);
  const SKIP_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'TITLE', 'title', 'desc', 'script', 'style']);
  const INTERACTIVE_ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'option', 'switch', 'textbox', 'combobox', 'searchbox',
    'slider', 'spinbutton', 'treeitem', 'listbox']);
  const CONTAINER_ITEM = new Map([['listbox', 'option'], ['menu', 'menuitem'], ['menubar', 'menuitem'], ['tree', 'treeitem'], ['tablist', 'tab']]);
  const BLOCK = new Set(['block', 'flex', 'grid', 'list-item', 'table', 'table-row', 'flow-root', 'table-caption']);

  const clip = (s, n) => {
    s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  };

  // Private-use code points are icon-font glyphs, not words.
  const PUA = /[\uE000-\uF8FF]/g;
  // Page text must not carry the markers the text excerpt uses for its block refs.
  const MARKS = /[\u0001-\u0003]/g;

  // A field value as it is (no whitespace folding): the first 60 chars, with the full length
  // when longer. Escaping happens where it is rendered.
  const exact = (v, st) => {
    v = String(v == null ? '' : v);
    if (v.length > 60) { st.value = v.slice(0, 60) + '…'; st.valueLength = v.length; } else st.value = v;
  };

  function win(el) { return el.ownerDocument.defaultView; }
  function style(el) { return win(el).getComputedStyle(el); }

  function ariaHidden(el) {
    for (let n = el; n; n = n.parentElement || (n.getRootNode && n.getRootNode().host)) {
      if (n.nodeType === 1 && n.getAttribute('aria-hidden') === 'true') return true;
    }
    return false;
  }

  function visible(el) {
    if (!el.checkVisibility({ visibilityProperty: true, contentVisibilityAuto: true })) return false;
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    return true;
  }

  function implicitRole(el) {
    const tag = el.tagName;
    const type = (el.getAttribute('type') || '').toLowerCase();
    switch (tag) {
      case 'A': case 'AREA': return el.hasAttribute('href') ? 'link' : null;
      case 'BUTTON': return 'button';
      case 'SUMMARY': return 'button';
      case 'SELECT': return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
      case 'TEXTAREA': return 'textbox';
      case 'INPUT':
        switch (type) {
          case 'hidden': return null;
          case 'button': case 'submit': case 'reset': case 'image': return 'button';
          case 'checkbox': return 'checkbox';
          case 'radio': return 'radio';
          case 'range': return 'slider';
          case 'number': return 'spinbutton';
          case 'search': return 'searchbox';
          case 'file': return 'file';
          case 'color': case 'date': case 'datetime-local': case 'month': case 'time': case 'week':
            return type;
          default: return 'textbox';
        }
    }
    if (el.isContentEditable && (!el.parentElement || !el.parentElement.isContentEditable)) return 'textbox';
    return null;
  }

  function role(el) {
    const r = (el.getAttribute('role') || '').trim().split(/\s+/)[0].toLowerCase();
    if (r && r !== 'presentation' && r !== 'none' && r !== 'generic') return r;
    return implicitRole(el);
  }

  function isInteractive(el, st) {
    const r = role(el);
    if (r && (INTERACTIVE_ROLES.has(r) || implicitRole(el))) return r;
    // The items of a listbox, menu or tree are options, menu items or tree items even without
    // a role of their own (autocomplete menus): each gets its own line.
    const p = el.parentElement;
    if (!r && p) {
      const item = CONTAINER_ITEM.get(role(p));
      if (item && (el.tagName === 'LI' || !p.querySelector(':scope > li'))) return item;
    }
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') return null;
    // A grab-only control (a resize handle, a splitter): no click does anything, a drag does.
    // A column's resize handle repeated in every body row of a grid is left out (the header's
    // handle resizes the column).
    const grab = isGrabHandle(el, st);
    if (grab === 'repeat') return null;
    if (grab) return 'handle';
    if (el.hasAttribute('onclick') || S.clickers.has(el)) return 'clickable';
    // A card made draggable for HTML5 drag and drop: browser_drag takes it by its ref.
    if (el.getAttribute('draggable') === 'true') return 'draggable';
    const item = delegatedItem(el);
    if (item) return item;
    const ti = el.getAttribute('tabindex');
    if (ti !== null && +ti >= 0 && el.tagName !== 'BODY') return r || 'focusable';
    if (st.cursor === 'pointer') {
      // Count it only where the pointer starts: a parent with cursor:pointer passes it on.
      const p = el.parentElement;
      if (!p || style(p).cursor !== 'pointer') return 'clickable';
    }
    return null;
  }

  const RESIZE_CURSOR = /^(?:[nsew]{1,2}|nwse|nesw|col|row)-resize$/;
  // Class names of resize handles and splitters (jQuery UI, Split.js, common hand-written ones).
  const GRAB_CLASSES = ['ui-resizable-handle', 'resize-handle', 'resizer', 'resize-grip', 'splitter', 'split-handle', 'gutter-horizontal', 'gutter-vertical'];
  // Whether `el` is a resize handle or splitter: a resize cursor where the cursor starts (a
  // parent with the same cursor passes it on), or a handle class, on a box a pointer can grab.
  function isGrabHandle(el, st) {
    const byClass = GRAB_CLASSES.some((c) => el.classList.contains(c));
    if (!byClass && !RESIZE_CURSOR.test(st.cursor)) return false;
    if (['TEXTAREA', 'INPUT', 'SELECT', 'BODY', 'HTML'].includes(el.tagName)) return false;
    const p = el.parentElement;
    if (!byClass && p && style(p).cursor === st.cursor) return false;
    const b = el.getBoundingClientRect();
    if (b.width < 2 || b.height < 2) return false;
    const row = el.closest('[role="row"], tr');
    if (row && !row.querySelector('[role="columnheader"], th')) return 'repeat';
    return true;
  }

  // Rows a grid positions absolutely (AG Grid moves them by transform when sorting, leaving the
  // DOM order as it was): the controls of a run of such rows are listed in screen order.
  function screenOrder(elements, listed) {
    const rowOf = new Map();
    const top = new Map();
    for (const e of listed) {
      const row = e.el.closest('[role="row"]');
      if (!row || !row.parentElement || style(row).position !== 'absolute') continue;
      rowOf.set(e.item, row);
      if (!top.has(row)) top.set(row, row.getBoundingClientRect().top);
    }
    if (!rowOf.size) return;
    for (let i = 0; i < elements.length;) {
      const r = rowOf.get(elements[i]);
      if (!r) { i++; continue; }
      let j = i + 1;
      while (j < elements.length && rowOf.has(elements[j]) && rowOf.get(elements[j]).parentElement === r.parentElement) j++;
      const run = elements.slice(i, j).map((it, k) => ({ it, k, y: top.get(rowOf.get(it)) }));
      run.sort((a, b) => (a.y - b.y) || (a.k - b.k));
      for (let k = 0; k < run.length; k++) elements[i + k] = run[k].it;
      i = j;
    }
  }

  const hasOwnText = (el) => Array.from(el.childNodes).some((c) => c.nodeType === 3 && c.data.trim());

  // An item of a list whose click listener sits on the list (event delegation: a file tree or
  // a menu without roles or listeners of its own): the <li> when it has text of its own, else
  // the element its text starts with (`<li><span>src</span><ul>…</ul></li>`, the label a person
  // clicks). Nested lists up to 6 levels. `treeitem` when the lists nest, else `clickable`.
  function delegatedItem(el) {
    let li = el;
    if (el.tagName !== 'LI') {
      li = el.parentElement;
      if (!li || li.tagName !== 'LI' || li.firstElementChild !== el || hasOwnText(li)) return null;
      if (el.tagName === 'UL' || el.tagName === 'OL') return null;
    } else if (!hasOwnText(el)) {
      return null;
    }
    let list = li.parentElement;
    for (let i = 0; list && i < 6; i++) {
      if (list.tagName !== 'UL' && list.tagName !== 'OL') return null;
      if (list.hasAttribute('onclick') || S.clickers.has(list)) {
        return list.querySelector('li > ul, li > ol') ? 'treeitem' : 'clickable';
      }
      const up = list.parentElement;
      if (!up || up.tagName !== 'LI') return null;
      list = up.parentElement;
    }
    return null;
  }

  function textOf(el, n) {
    return clip(el.innerText !== undefined ? el.innerText : el.textContent, n);
  }

  // A label's text without the text of the controls inside it (a select's options, say).
  function ownText(root) {
    let out = '';
    // Depth-capped like `walk`: a page nesting thousands of elements in a label must not
    // overflow the stack and break every observation.
    const rec = (n, depth) => {
      if (depth > 64) return;
      for (const c of Array.from(n.childNodes)) {
        if (c.nodeType === 3) out += c.data;
        // A shadow <label> names its control through a <slot>: the slotted text (Shoelace's
        // sl-checkbox) is the label's text.
        else if (c.nodeType === 1 && c.tagName === 'SLOT') {
          for (const a of c.assignedNodes({ flatten: true }).slice(0, 200)) {
            if (a.nodeType === 3) out += a.data;
            else if (a.nodeType === 1) { out += ' '; rec(a, depth + 1); out += ' '; }
          }
          if (!c.assignedNodes().length) rec(c, depth + 1);
        } else if (c.nodeType === 1 && !['SELECT', 'TEXTAREA', 'INPUT', 'BUTTON', 'SCRIPT', 'STYLE', 'OPTION'].includes(c.tagName)) rec(c, depth + 1);
      }
    };
    rec(root, 0);
    return out;
  }

  function labelText(el) {
    const ids = (el.getAttribute('aria-labelledby') || '').trim();
    if (ids) {
      const root = el.getRootNode();
      const parts = ids.split(/\s+/).map((id) => {
        const t = root.getElementById ? root.getElementById(id) : el.ownerDocument.getElementById(id);
        return t ? clip(t.textContent, 80) : '';
      }).filter(Boolean);
      if (parts.length) return parts.join(' ');
    }
    const al = el.getAttribute('aria-label');
    if (al && al.trim()) return al;
    if (el.labels && el.labels.length) {
      const t = Array.from(el.labels).map((l) => clip(ownText(l), 80)).filter(Boolean).join(' ');
      if (t) return t;
    }
    return '';
  }

  function accName(el, r) {
    let name = labelText(el);
    if (name) return clip(name, 80);
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') {
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (['button', 'submit', 'reset'].includes(type)) return clip(el.value || type, 80);
      if (type === 'image') return clip(el.alt || el.title || 'image', 80);
      const ph = el.getAttribute('placeholder');
      if (ph) return clip(ph, 80);
      if (el.title) return clip(el.title, 80);
      return clip(el.name || '', 80);
    }
    if (tag === 'IMG') return clip(el.alt || el.title, 80);
    let t = clip(contentText(el).replace(PUA, ''), 80);
    if (!t) {
      const img = el.querySelector('img[alt]');
      if (img) t = clip(img.alt, 80);
    }
    return t || clip(el.title || '', 80);
  }

  const ICON_LIGATURE = '.material-icons, .material-icons-outlined, .material-icons-round, .material-icons-sharp, .material-icons-two-tone, .material-symbols-outlined, .material-symbols-rounded, .material-symbols-sharp';
  // An element's rendered text for its name: without its nested lists (a tree item's children
  // are not its name) and without icon-font ligatures (`<i class="material-icons">star</i>` is a
  // glyph; it becomes a hint).
  function contentText(el) {
    let skip = false;
    for (const c of Array.from(el.children)) {
      if (c.tagName === 'UL' || c.tagName === 'OL' || c.getAttribute('role') === 'group') { skip = true; break; }
    }
    if (!skip && el.firstElementChild) skip = !!el.querySelector(ICON_LIGATURE);
    if (!skip) return el.innerText !== undefined ? el.innerText : el.textContent;
    let out = '';
    const rec = (n, depth) => {
      if (depth > 32) return;
      for (const c of Array.from(n.childNodes)) {
        if (c.nodeType === 3) out += c.data;
        else if (c.nodeType === 1) {
          if (SKIP_TAGS.has(c.tagName) || c.matches(ICON_LIGATURE)) continue;
          if (n === el && (c.tagName === 'UL' || c.tagName === 'OL' || c.getAttribute('role') === 'group')) continue;
          const cs = style(c);
          if (cs.display === 'none' || cs.visibility !== 'visible') continue;
          if (BLOCK.has(cs.display)) out += ' ';
          rec(c, depth + 1);
        }
      }
    };
    rec(el, 0);
    return out;
  }

  // ---- name hints for nameless controls ----
  // Words that say what an icon-only control does; found first when a class list or id mixes
  // them with layout words.
  const MEANING = new Set(('star unstar favorite favourite trash delete remove reply retweet repost like unlike '
    + 'love heart share send close expand collapse edit menu search archive snooze pin unpin flag bookmark '
    + 'download upload print copy paste cut refresh reload settings cog gear more add plus minus new compose '
    + 'next prev previous back forward play pause stop mute unmute volume mic camera video phone call mail email '
    + 'attach attachment emoji comment comments vote upvote downvote follow subscribe bell notification notifications '
    + 'user profile account home cart basket filter sort zoom info help save cancel check done undo redo '
    + 'up down left right arrow chevron caret dots ellipsis kebab hamburger bars lock unlock eye hide show '
    + 'open fullscreen minimize maximize dismiss clear logout login calendar date tag label link unlink '
    + 'bold italic underline strike list quote code image photo map location rotate crop move drag grip handle '
    + 'toggle select lightbulb sun moon theme translate language report block mark read unread spam').split(' '));
  // Layout, state and framework words that say nothing about what a control does.
  const NOISE = new Set(('btn button buttons icon icons ico js col cols fa fas far fab fal fad fass bi glyph glyphicon '
    + 'glyphicons mdi material symbols outlined outline round rounded sharp two tone fill filled solid regular '
    + 'light thin alt sm lg md xs xl xxl small large big mini tiny primary secondary tertiary default ghost flat '
    + 'plain text item items wrapper wrap inner outer container box el ui cmp component control ctrl action '
    + 'actions pull float clearfix flex inline block hover focus active disabled selected is has no not the and '
    + 'of to svg img image bg background pointer cursor clickable interactive hidden visible dark white black '
    + 'gray grey color theme row cell grid span div react vue ng css sc jsx emotion style styled module root '
    + 'base main content element widget tool tools bar nav style lucide feather octicon codicon ion ionicon '
    + 'ti la lni ri ph tabler heroicon heroicons remix boxicons bx bxs data test testid qa id cy ml mr mt mb '
    + 'px py pt pb pl pr mx my svelte with for on off').split(' '));
  const ICON_CLASS = /^(?:fa|fas|far|fab|fal|fad|bi|icon|glyphicon|mdi|ion|ionicon|ti|la|las|lni|feather|octicon|codicon|ri|ph|bx|bxs|bxl|gg|uil|lucide|heroicon|icofont|wi|flaticon|si|zmdi)-(.+)$/i;

  // Up to `max` words of `s` (split on non-letters and camelCase), meaningful ones first.
  function hintWords(sources, max) {
    const words = [];
    for (const src of sources) {
      for (const token of String(src || '').split(/\s+/)) {
        // Hashed class names (css-1x2y3z, Button_root__3kX9a, sc-AxjAm) carry no words.
        if (!token || /\d/.test(token) || /^(?:sc|css|jsx|emotion|svelte|chakra|mui|tw)-/i.test(token)) continue;
        for (const w of token.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase().split(/[^a-z]+/)) {
          if (w.length >= 2 && !NOISE.has(w) && !words.includes(w)) words.push(w);
        }
      }
    }
    const meaningful = words.filter((w) => MEANING.has(w));
    const plausible = words.filter((w) => !MEANING.has(w) && w.length >= 3 && w.length <= 14 && /[aeiouy]/.test(w));
    return meaningful.concat(plausible).slice(0, max).join(' ');
  }

  const fileWords = (url) => {
    const m = /([^/#?]+?)(?:\.[a-z0-9]{2,5})?(?:[?#].*)?$/i.exec(String(url || '').split('#').pop() || '');
    return m ? m[1] : '';
  };

  // A short hint for a control without a name, or ''.
  function hintOf(el) {
    // An inner <svg><title>, or the symbol an inner <use> points at.
    const title = el.querySelector('svg title');
    if (title && clip(title.textContent, 40)) return clip(title.textContent, 40);
    const use = el.querySelector('svg use');
    if (use) {
      const h = hintWords([fileWords(use.getAttribute('href') || use.getAttribute('xlink:href'))], 2);
      if (h) return h;
    }
    // An icon-font glyph: fa-star, bi-trash, material-icons text.
    const glyphs = [el].concat(Array.from(el.querySelectorAll('i, span, em')).slice(0, 6));
    for (const g of glyphs) {
      if (g.matches(ICON_LIGATURE)) {
        const t = clip(g.textContent.replace(/_/g, ' '), 30);
        if (t) return t;
      }
      for (const c of Array.from(g.classList)) {
        const m = ICON_CLASS.exec(c);
        if (m) { const h = hintWords([m[1]], 2); if (h) return h; }
      }
    }
    // Words in its own class list and id.
    const own = hintWords([el.getAttribute('class'), el.id], 2);
    if (own) return own;
    // A data-* action attribute.
    for (const a of Array.from(el.attributes)) {
      if (/^data-(?:action|act|cmd|command|icon|testid|test-id|test|qa|cy|tooltip|title|label|name|type|role|event|track|ga)$/.test(a.name)) {
        const h = hintWords([a.value], 2);
        if (h) return h;
      }
    }
    // A background image's file name (trash-icon.png -> trash), its own or a child's.
    for (const b of [el].concat(Array.from(el.children).slice(0, 3))) {
      const bg = style(b).backgroundImage || '';
      const m = /url\(["']?([^"')]+)["']?\)/.exec(bg);
      if (m && !/^data:/.test(m[1])) {
        const h = hintWords([fileWords(m[1])], 2);
        if (h) return h;
      }
    }
    // Words in a child's class list (a bare <i class="star">).
    for (const c of Array.from(el.children).slice(0, 3)) {
      const h = hintWords([c.getAttribute('class')], 2);
      if (h) return h;
    }
    return '';
  }

  const SENSITIVE_AC = /^(cc-.*|current-password|new-password|one-time-code)$/;
  const CARD_NUMBER = /(card|cc|credit)[\s_.-]*(number|num|no\b|#)|cardnumber|ccnum|credit[\s_.-]*card|\bpan\b/i;
  const CVC = /\b(cvc|cvv|cvv2|cvc2|csc|cid)\b|security[\s_.-]*code|card[\s_.-]*verification|cvc|cvv/i;
  const EXPIRY = /(card|cc)[\s_.-]*(exp|expiry|expiration)|exp(iry|iration)?[\s_.-]*(date|month|year|mm|yy)|\bmm\s*\/\s*yy|expir(y|es|ation)/i;

  // Why filling `el` needs the opt-in, or '' when it does not.
  function sensitivity(el) {
    if (el.tagName !== 'INPUT' && el.tagName !== 'TEXTAREA') return '';
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (type === 'password') return 'type=password';
    const ac = (el.getAttribute('autocomplete') || '').toLowerCase().trim().split(/\s+/);
    const hit = ac.find((t) => SENSITIVE_AC.test(t));
    if (hit) return 'autocomplete=' + hit;
    // Every label source counts, not only the one that names the field: an aria-label must not
    // hide a <label>Card number</label>.
    const labels = [el.getAttribute('aria-label') || ''];
    const ids = (el.getAttribute('aria-labelledby') || '').trim();
    if (ids) {
      const root = el.getRootNode();
      for (const id of ids.split(/\s+/)) {
        const t = root.getElementById ? root.getElementById(id) : el.ownerDocument.getElementById(id);
        if (t) labels.push(clip(t.textContent, 80));
      }
    }
    if (el.labels) for (const l of Array.from(el.labels)) labels.push(clip(ownText(l), 80));
    const hints = [el.name || '', el.id || '', ...labels, el.getAttribute('placeholder') || ''];
    for (const h of hints) {
      if (!h) continue;
      if (CARD_NUMBER.test(h)) return 'looks like a card number field (' + clip(h, 40) + ')';
      if (CVC.test(h)) return 'looks like a card security code field (' + clip(h, 40) + ')';
      if (EXPIRY.test(h)) return 'looks like a card expiry field (' + clip(h, 40) + ')';
    }
    return '';
  }

  function refFor(el) {
    let n = S.refOf.get(el);
    if (n === undefined) {
      n = S.next++;
      S.refOf.set(el, n);
      S.byRef.set(n, new WeakRef(el));
    }
    return n;
  }

  function frameNumber(iframe) {
    let n = S.frameOf.get(iframe);
    if (n === undefined) {
      n = S.nextFrame++;
      S.frameOf.set(iframe, n);
      S.frameEls.set(n, new WeakRef(iframe));
    }
    return n;
  }

  // The chain of frame numbers from the top document to `doc` (empty for the top document).
  function framePath(doc) {
    const path = [];
    for (let w = doc.defaultView; w && w !== window.top && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
      path.unshift(frameNumber(w.frameElement));
    }
    return path;
  }
  function refName(el) {
    const fp = framePath(el.ownerDocument);
    return (fp.length ? 'f' + fp[fp.length - 1] : '') + 'e' + refFor(el);
  }

  // Offset of `doc`'s viewport inside the top viewport.
  function frameOffset(doc) {
    let x = 0, y = 0;
    for (let w = doc.defaultView; w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
      const fe = w.frameElement;
      const r = fe.getBoundingClientRect();
      x += r.left + fe.clientLeft; y += r.top + fe.clientTop;
    }
    return { x, y };
  }

  function describe(el) {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + clip(el.id, 30);
    else if (el.classList && el.classList.length) s += '.' + clip(el.classList[0], 30);
    const t = textOf(el, 40);
    if (t) s += ' "' + t + '"';
    return s;
  }

  // The element of shadow root `root` at (x, y), or null when the engine offers no hit test
  // there (Lightpanda 1.0.2's ShadowRoot has no elementFromPoint): the host is then the innermost
  // hit, and an engine without layout has its cover and clip facts dropped anyway.
  function shadowHit(root, x, y) {
    return typeof root.elementFromPoint === 'function' ? root.elementFromPoint(x, y) : null;
  }

  // What covers `el` at its centre (in its own document), or '' when the centre hits `el`.
  function coverOf(el, r, p) {
    const doc = el.ownerDocument;
    const cx = p ? p.x : r.left + r.width / 2, cy = p ? p.y : r.top + r.height / 2;
    const vw = doc.documentElement.clientWidth || win(el).innerWidth;
    const vh = doc.documentElement.clientHeight || win(el).innerHeight;
    if (cx < 0 || cy < 0 || cx >= vw || cy >= vh) return '';
    let hit = doc.elementFromPoint(cx, cy);
    // Descend through open shadow roots to the innermost element.
    for (let i = 0; hit && hit.shadowRoot && i < 16; i++) {
      const inner = shadowHit(hit.shadowRoot, cx, cy);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    if (!hit || hit === el || el.contains(hit)) return '';
    // Hitting an element inside el's shadow tree, or a light-DOM ancestor that hosts it.
    for (let n = hit; n; n = n.parentNode || n.host) { if (n === el) return ''; }
    if (hit.tagName === 'LABEL' && hit.control === el) return '';
    // A part of the same component: an element in el's shadow tree or the host's light DOM
    // (Shoelace's sl-select shows its tags over its own combobox).
    const host = el.getRootNode().host;
    if (host) for (let n = hit; n; n = n.parentNode || n.host) { if (n === host) return ''; }
    if (el.labels && Array.from(el.labels).includes(hit)) return '';
    return describe(hit);
  }

  function elementState(el, r) {
    const st = {};
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA') {
      // The IDL type (always one of HTML's own tokens), never the raw attribute: a page must not
      // put newlines or made-up element lines into the observation through `type`.
      const type = String(el.type || (tag === 'TEXTAREA' ? 'textarea' : 'text')).toLowerCase();
      if (!['text', 'textarea', 'checkbox', 'radio'].includes(type)) st.type = type;
      if (type === 'checkbox' || type === 'radio') st.checked = el.checked;
      else if (!['button', 'submit', 'reset', 'image', 'file'].includes(type)) {
        if (type === 'password') st.value = el.value ? '(' + el.value.length + ' chars hidden)' : '';
        else exact(el.value, st);
      }
      if (el.required) st.required = true;
      if (el.readOnly) st.readonly = true;
    } else if (tag === 'SELECT') {
      const opts = Array.from(el.options);
      st.selected = opts.filter((o) => o.selected).map((o) => clip(o.label || o.text, 40));
      st.options = opts.slice(0, 6).map((o) => clip(o.label || o.text, 30));
      st.optionCount = opts.length;
      if (el.multiple) st.multiple = true;
      if (el.required) st.required = true;
    } else if (el.isContentEditable) {
      exact(el.innerText, st);
    }
    const ac = el.getAttribute('aria-checked');
    if (ac && st.checked === undefined) st.checked = ac === 'true' ? true : (ac === 'mixed' ? 'mixed' : false);
    const ae = el.getAttribute('aria-expanded');
    if (ae) st.expanded = ae === 'true';
    else if (tag === 'SUMMARY' && el.parentElement && el.parentElement.tagName === 'DETAILS') st.expanded = el.parentElement.open;
    // A slider handle's value (noUiSlider, ARIA sliders): its text form when given.
    const vn = el.getAttribute('aria-valuenow');
    if (vn !== null && st.value === undefined) {
      const vt = el.getAttribute('aria-valuetext');
      st.ariaValue = clip(vt && vt.trim() ? vt : vn, 40);
      const lo = el.getAttribute('aria-valuemin'), hi = el.getAttribute('aria-valuemax');
      if (lo !== null && hi !== null) st.range = clip(lo, 20) + '-' + clip(hi, 20);
    }
    // A column header's sort state.
    const sort = el.getAttribute('aria-sort');
    if (sort === 'ascending' || sort === 'descending' || sort === 'other') st.sort = sort;
    const as = el.getAttribute('aria-selected');
    if (as === 'true') st.selectedItem = true;
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') st.disabled = true;
    if ((tag === 'A' || tag === 'AREA') && el.hasAttribute('href')) st.href = clip(el.getAttribute('href'), 100);
    if (el.target === '_blank') st.newTab = true;
    const sens = sensitivity(el);
    if (sens) st.fillProtected = true;
    return st;
  }

  function isBlock(st) { return BLOCK.has(st.display); }

  // Walk the flattened tree (open shadow roots, slots, same-origin iframes) in document order.
  // `leave(el)`, when given, runs after an element's children were walked.
  function walk(root, visit, depth, leave) {
    if (depth > 64) return;
    const kids = root.shadowRoot ? [root.shadowRoot] : (root.tagName === 'SLOT' ? root.assignedNodes({ flatten: true }) : null);
    const list = kids && kids.length ? kids : root.childNodes;
    for (const n of Array.from(list)) {
      if (n.nodeType === 11) { walk(n, visit, depth + 1, leave); continue; }
      if (visit(n) !== false && n.nodeType === 1) {
        walk(n, visit, depth + 1, leave);
        if (leave) leave(n);
      }
    }
  }

  // Blocks of the text excerpt that get a ref (when they hold no such block themselves).
  const TEXT_BLOCKS = new Set(['P', 'LI', 'TD', 'TH', 'DT', 'DD', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'BLOCKQUOTE', 'PRE', 'FIGCAPTION', 'CAPTION']);
  const SCROLLS = new Set(['auto', 'scroll', 'overlay']);
  // Most clipped controls listed per scroll container (the container line counts the rest).
  const MAX_CLIPPED_PER_LIST = 3;
  const ROLE_RANK = new Map([['clickable', 0], ['focusable', 0], ['draggable', 0], ['link', 1], ['button', 1]]);
  const rank = (r) => (ROLE_RANK.has(r) ? ROLE_RANK.get(r) : 2);

  // Whether a block is nothing but one link or button (which has a ref of its own).
  function onlyControl(el) {
    if (el.children.length !== 1 || !['A', 'BUTTON'].includes(el.children[0].tagName)) return false;
    for (const c of Array.from(el.childNodes)) if (c.nodeType === 3 && c.data.trim()) return false;
    return true;
  }

  // Elements never made a text block of their own (their text names something else).
  const NOT_RUNS = new Set(['BODY', 'HTML', 'LABEL', 'OPTION', 'OPTGROUP', 'LEGEND', 'SUMMARY', 'SLOT', 'A', 'BUTTON']);
  const CONTROL_TAGS = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'IFRAME']);
  // Whether `el` (outside any text block and control) is a run of text a model may need to read
  // or select: it holds text of its own (a div's or span's text node), or it is a block whose
  // children are all inline, hold no control and carry text (`<div><span>a</span> <b>b</b></div>`).
  function textRun(el, st) {
    // A component's host: its text is slotted into its own parts (a label, say).
    if (NOT_RUNS.has(el.tagName) || el.isContentEditable || el.shadowRoot) return false;
    const kids = el.childNodes;
    if (kids.length > 200) return false;
    let any = false, inline = true;
    for (const c of Array.from(kids)) {
      if (c.nodeType === 3) {
        if (c.data.trim()) return true;
      } else if (c.nodeType === 1) {
        any = true;
        if (!inline) continue;
        if (CONTROL_TAGS.has(c.tagName) || c.shadowRoot || isBlock(style(c))) inline = false;
      }
    }
    return any && inline && isBlock(st) && !!el.textContent.trim();
  }

  function observe(opts) {
    const maxText = opts.maxText || 20000;
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    const elements = [];
    const frames = [];
    // Listed elements with their DOM node, for the passes after the walk.
    const listed = [];
    let text = '';
    let textFull = false;
    const pushText = (s) => {
      if (textFull) return;
      text += s;
      if (text.length > maxText) { text = text.slice(0, maxText); textFull = true; }
    };
    const visitDoc = (doc) => {
      const off = frameOffset(doc);
      const root = doc.scrollingElement || doc.documentElement;
      // Clipping ancestors of the node being visited (nearest last): {el, box, scroll, item}.
      const clips = [];
      let block = null;
      // The outermost listed control being walked (its text is its name, not a text run).
      let control = null;
      const clippedBy = (rect) => {
        const cx = rect.left + rect.width / 2, cy = rect.top + rect.height / 2;
        for (let i = clips.length - 1; i >= 0; i--) {
          const b = clips[i].box;
          if (cx < b.left || cx >= b.right || cy < b.top || cy >= b.bottom) return clips[i];
        }
        return null;
      };
      const visit = (n) => {
        if (n.nodeType === 3) {
          const t = n.data.replace(MARKS, '').replace(/\s+/g, ' ');
          if (t) pushText(t);
          return false;
        }
        if (n.nodeType !== 1) return false;
        const el = n;
        if (SKIP_TAGS.has(el.tagName)) return false;
        if (el.getAttribute('aria-hidden') === 'true') return false;
        const st = style(el);
        if (st.display === 'none') return false;
        if (st.display === 'contents') return true;
        const rect = el.getBoundingClientRect();
        const hiddenSelf = st.visibility !== 'visible' || rect.width <= 0 || rect.height <= 0 || !el.checkVisibility({ contentVisibilityAuto: true });
        // Zero-size boxes can still show overflowing children; only stop at clipped ones.
        if ((rect.width <= 0 || rect.height <= 0) && (st.overflow === 'hidden' || st.overflow === 'clip') && el.tagName !== 'SLOT') return false;
        if (isBlock(st) || el.tagName === 'BR') pushText('\n');
        else if (st.display.startsWith('inline-') || ['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON', 'IMG', 'LABEL', 'TD', 'TH'].includes(el.tagName)) pushText(' ');
        if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
          if (hiddenSelf) return false;
          const fnum = frameNumber(el);
          let child = null;
          try { child = el.contentDocument; } catch (_) { child = null; }
          let origin = '';
          try { origin = new URL(el.src || 'about:blank', doc.baseURI).origin; } catch (_) { origin = clip(el.src, 80); }
          // A scheme the browser never loads into a frame of a web page (file:, view-source:,
          // chrome:, ...): the frame stays empty; say so instead of listing an empty document.
          let scheme = '';
          try { scheme = new URL(el.getAttribute('src') || 'about:blank', doc.baseURI).protocol; } catch (_) { scheme = ''; }
          const blocked = scheme && !FRAME_SCHEMES.has(scheme) ? scheme + ' pages do not load in frames' : undefined;
          // Same origin by its URL, not sandboxed, and neither a document nor a window: the
          // engine does not expose the frame (Lightpanda 1.0.2); it is not cross-origin. (A frame
          // that went cross-origin, by a redirect say, still has a window in Chromium.)
          const ownOrigin = doc.defaultView && doc.defaultView.location ? doc.defaultView.location.origin : '';
          let win0 = null;
          try { win0 = el.contentWindow; } catch (_) { win0 = null; }
          const unreachable = !child && !win0 && !blocked && !el.hasAttribute('sandbox') && !!ownOrigin && origin === ownOrigin ? true : undefined;
          frames.push({ frame: 'f' + fnum, name: clip(el.title || el.name || el.getAttribute('aria-label') || '', 60), origin, sameOrigin: !!child, src: clip(el.getAttribute('src') || '', 100), at: elements.length, blocked, unreachable });
          if (blocked) return false;
          if (child && child.documentElement) {
            pushText('\n');
            visitDoc(child);
            pushText('\n');
          }
          return false;
        }
        if (!hiddenSelf) {
          const top = rect.top + off.y, left = rect.left + off.x;
          let where = top + rect.height <= 0 ? 'above' : (top >= vh ? 'below' : (left + rect.width <= 0 || left >= vw ? 'side' : 'in'));
          let r = isInteractive(el, st);
          // A scroll container (vertical): listed with its position, even when not a control.
          const scrollsY = el !== root && el !== doc.body && SCROLLS.has(st.overflowY) && el.scrollHeight > el.clientHeight + 2 && el.tagName !== 'TEXTAREA';
          // A horizontal-only one (a carousel, a row of cards): listed too, with its x position.
          const scrollsX = !scrollsY && el !== root && el !== doc.body && SCROLLS.has(st.overflowX) && el.scrollWidth > el.clientWidth + 2 && el.tagName !== 'TEXTAREA' && el.tagName !== 'INPUT';
          const scrolls = scrollsY || scrollsX;
          let item = null;
          if (r || scrolls) {
            const state = r ? elementState(el, rect) : {};
            item = { ref: refName(el), role: r || 'scrollable', name: r ? accName(el, r) : (clip(labelText(el), 60) || textOf(el, 40)), state, where };
            let clip0 = clippedBy(rect);
            // Something that escapes its clipping ancestor (position: fixed) and is hit at its
            // centre is not clipped.
            if (clip0 && where === 'in') {
              const cx = rect.left + rect.width / 2, cy = rect.top + rect.height / 2;
              const dvw = doc.documentElement.clientWidth || win(el).innerWidth;
              const dvh = doc.documentElement.clientHeight || win(el).innerHeight;
              if (cx >= 0 && cy >= 0 && cx < dvw && cy < dvh && !coverOf(el, rect)) clip0 = null;
            }
            if (clip0) {
              // Clipped by an ancestor that scrolls (or hides overflow): not a cover.
              item.clipped = clip0.scroll ? 'list' : 'clip';
              if (clip0.scroll && clip0.item) {
                clip0.clippedListed = (clip0.clippedListed || 0) + 1;
                if (clip0.clippedListed > MAX_CLIPPED_PER_LIST) item.where = where = 'inlist';
                else if (clip0.item.where === 'in' && where !== 'in') item.where = where = 'in';
              }
            } else if (where === 'in') {
              const cover = coverOf(el, rect);
              if (cover) item.coveredBy = cover;
            }
            elements.push(item);
            listed.push({ el, item, doc });
          }
          if (scrollsX) {
            item.state.scrollX = { x: Math.round(el.scrollLeft), max: Math.round(el.scrollWidth - el.clientWidth) };
            let box = el;
            for (let i = 0; i < 2 && box.children.length === 1; i++) box = box.children[0];
            const cb = el.getBoundingClientRect();
            const inLeft = cb.left + el.clientLeft, inRight = inLeft + el.clientWidth;
            let right = 0, left = 0;
            for (const c of Array.from(box.children).slice(0, 2000)) {
              const r2 = c.getBoundingClientRect();
              if (r2.width <= 0) continue;
              if (r2.left >= inRight - 1) right++;
              else if (r2.right <= inLeft + 1) left++;
            }
            if (right) item.state.itemsRight = right;
            if (left) item.state.itemsLeft = left;
          }
          if (scrollsY) {
            const max = el.scrollHeight - el.clientHeight;
            item.state.scroll = { y: Math.round(el.scrollTop), max: Math.round(max) };
            // Items of the list: its children, or those of a lone wrapper child.
            let box = el;
            for (let i = 0; i < 2 && box.children.length === 1; i++) box = box.children[0];
            const cb = el.getBoundingClientRect();
            const inTop = cb.top + el.clientTop, inBottom = inTop + el.clientHeight;
            let below = 0, above = 0;
            for (const c of Array.from(box.children).slice(0, 2000)) {
              const r2 = c.getBoundingClientRect();
              if (r2.height <= 0) continue;
              if (r2.top >= inBottom - 1) below++;
              else if (r2.bottom <= inTop + 1) above++;
            }
            if (below) item.state.itemsBelow = below;
            if (above) item.state.itemsAbove = above;
          }
          if (st.overflowX !== 'visible' || st.overflowY !== 'visible') {
            const left0 = rect.left + el.clientLeft, top0 = rect.top + el.clientTop;
            clips.push({ el, scroll: SCROLLS.has(st.overflowY) || SCROLLS.has(st.overflowX), item: scrolls ? item : null,
              box: { left: left0, top: top0, right: left0 + (el.clientWidth || rect.width), bottom: top0 + (el.clientHeight || rect.height) } });
          }
          // A text block of the excerpt, named by a ref. A block inside another ends the outer
          // one's line (whose text so far was its own: a tree item's label before its list).
          if (r && !control) control = el;
          if (!textFull && !item && !control && (TEXT_BLOCKS.has(el.tagName) || ((!block || isBlock(st)) && textRun(el, st))) && !onlyControl(el)) {
            if (block) pushText('\u0003\n');
            block = el;
            pushText('\n\u0001' + refName(el) + ' ' + el.tagName.toLowerCase() + '\u0002');
          }
          // A control's own text is its name; keep it out of the text excerpt only for form fields.
          if (r && (el.tagName === 'SELECT' || el.tagName === 'TEXTAREA')) {
            leave(el);
            return false;
          }
        } else if (st.visibility !== 'visible') {
          // visibility:hidden children may override with visibility:visible; keep walking.
          return true;
        }
        return true;
      };
      const leave = (el) => {
        if (clips.length && clips[clips.length - 1].el === el) clips.pop();
        if (block === el) { block = null; pushText('\u0003\n'); }
        if (control === el) control = null;
      };
      // Hidden text: text nodes are only kept when their parent element is rendered and visible.
      const textVisit = (n) => {
        if (n.nodeType === 3) {
          const p = n.parentElement;
          if (!p) return false;
          const ps = style(p);
          if (ps.visibility !== 'visible') return false;
          return visit(n);
        }
        return visit(n);
      };
      if (doc.body) walk(doc.body, textVisit, 0, leave);
    };
    visitDoc(document);
    screenOrder(elements, listed);
    const rows = structure(listed, vh);
    const se = document.scrollingElement || document.documentElement;
    return {
      url: location.href,
      title: clip(document.title, 120),
      viewport: { width: vw, height: vh },
      scroll: { y: Math.round(se.scrollTop), height: Math.round(se.scrollHeight) },
      elements: elements.filter((item) => !item.merged),
      frames,
      rows,
      text: textBlocks(text.replace(/[ \t]*\n[ \t\n]*/g, '\n').replace(/[ \t]+/g, ' ').trim()),
    };
  }

  // The excerpt's marked blocks (\u0001ref tag\u0002 text \u0003) as `ref tag "text"` lines.
  function textBlocks(t) {
    let out = '';
    let open = null;
    let buf = '';
    const flush = () => {
      const b = buf.replace(/\s+/g, ' ').trim();
      if (b) out += '\n' + open + ' ' + JSON.stringify(b) + '\n';
      open = null; buf = '';
    };
    for (const part of t.split(/(\u0001[^\u0001-\u0003]*\u0002|\u0003)/)) {
      if (part.charAt(0) === '\u0001') { if (open) flush(); open = part.slice(1, -1); }
      else if (part === '\u0003') { if (open) flush(); }
      else if (open) buf += part;
      else out += part;
    }
    if (open) flush();
    return out.replace(/\s*\n\s*/g, '\n').trim();
  }

  // The text of `el` beside the names of the listed controls `inside` it (longest first, so
  // "World" does not eat "World Home"; a clipped name without its ellipsis), spaces collapsed.
  function textBeside(el, inside) {
    let rest = contentText(el).replace(PUA, '').replace(/\s+/g, ' ');
    const names = inside.map((c) => (c.item.name || '').replace(/…$/, '')).filter(Boolean).sort((x, y) => y.length - x.length);
    for (const n of names) rest = rest.split(n).join(' ');
    return rest.replace(/\s+/g, ' ').trim();
  }

  const norm = (s) => String(s || '').replace(/\s+/g, ' ').trim().toLowerCase();

  // After the walk: list each node once, name the nameless, infer tree state and group controls
  // under the repeated item (row, card, post) they belong to. Returns the rows' headers.
  function structure(listed, vh) {
    const entryOf = new Map();
    for (const e of listed) entryOf.set(e.el, e);
    // Listed descendants of each ancestor (12 levels up).
    const under = new Map();
    for (const e of listed) {
      let n = e.el.parentElement;
      for (let i = 0; n && i < 12; i++, n = n.parentElement) {
        const l = under.get(n);
        if (l) l.push(e); else under.set(n, [e]);
      }
    }
    const alive = (n) => (under.get(n) || []).filter((e) => !e.item.merged);
    // One line per node: a wrapper listed together with its only control (a clickable <li>
    // around a link, a menuitem around an <a>) becomes one line, with the more specific role.
    for (let i = listed.length - 1; i >= 0; i--) {
      const e = listed[i];
      if (e.item.role === 'scrollable') continue;
      const inner = alive(e.el);
      if (inner.length !== 1 || inner[0].item.role === 'scrollable') continue;
      const d = inner[0];
      if (e.item.name && d.item.name && norm(e.item.name) !== norm(d.item.name)) continue;
      if (rank(e.item.role) > rank(d.item.role)) d.item.role = e.item.role;
      if (!d.item.name) d.item.name = e.item.name;
      for (const k of ['expanded', 'selectedItem', 'checked', 'disabled', 'href', 'newTab']) {
        if (e.item.state[k] !== undefined && d.item.state[k] === undefined) d.item.state[k] = e.item.state[k];
      }
      e.item.merged = true;
    }
    const live = listed.filter((e) => !e.item.merged);
    for (const e of live) {
      const item = e.item;
      // A container of several controls (a menu, a listbox, a card) is not named by their
      // joined text: each control has its own line.
      // Its own text (beside its controls' names) names it when nothing else does: a mail row
      // that is itself clickable is named by its sender and subject.
      const inner = alive(e.el);
      if (inner.length >= 2) item.name = clip(labelText(e.el) || e.el.title || textBeside(e.el, inner), 80);
      if (item.role === 'handle') {
        // The name, if any, is the page's; the hint says what kind of grab it is.
        item.hint = 'resize handle';
      } else if (!item.name) {
        const h = hintOf(e.el);
        if (h) item.hint = h;
      }
      // Trees and disclosure without ARIA: the nested list of the item's <li> says it.
      if (item.state.expanded === undefined) {
        let li = null;
        for (let n = e.el, i = 0; n && i < 4; n = n.parentElement, i++) {
          if (n.tagName === 'LI' || n.getAttribute('role') === 'treeitem') { li = n; break; }
        }
        if (li) {
          const sub = Array.from(li.children).find((c) => (c.tagName === 'UL' || c.tagName === 'OL' || c.getAttribute('role') === 'group') && !c.contains(e.el));
          if (sub && sub.children.length) {
            item.state.children = true;
            const r = sub.getBoundingClientRect();
            item.state.expanded = sub.checkVisibility({ visibilityProperty: true }) && r.width > 0 && r.height > 0;
          }
        }
      }
    }
    // Rows: the nearest repeated container (siblings with the same tag, role and first class,
    // each holding controls) with text of its own beside two or more controls or a nameless one.
    const sig = (n) => n.tagName + '|' + (n.getAttribute('role') || '') + '|' + (n.classList.length ? n.classList[0].replace(/\d+/g, '') : '');
    const groups = new Map();
    const repeated = (a) => {
      const p = a.parentElement;
      if (!p) return false;
      let m = groups.get(p);
      if (!m) {
        m = new Map();
        for (const c of Array.from(p.children).slice(0, 1000)) {
          if (!under.has(c) && !entryOf.has(c)) continue;
          const k = sig(c);
          m.set(k, (m.get(k) || 0) + 1);
        }
        groups.set(p, m);
      }
      return (m.get(sig(a)) || 0) >= 2;
    };
    const rowOf = new Map();
    const rows = [];
    const rowFor = (a) => {
      if (rowOf.has(a)) return rowOf.get(a);
      let row = null;
      // Classless <div>s repeat everywhere; an item is a list item, a table row, an article or
      // something with a class or role.
      const marked = ['LI', 'TR', 'ARTICLE'].includes(a.tagName) || a.classList.length > 0 || a.hasAttribute('role');
      if (marked && repeated(a)) {
        const inside = alive(a);
        const self = entryOf.get(a);
        const controls = inside.concat(self && !self.item.merged ? [self] : []);
        const nameless = inside.some((c) => !c.item.name && c.item.role !== 'scrollable');
        const r = a.getBoundingClientRect();
        if (controls.length <= 10 && (controls.length >= 2 || nameless) && r.height <= vh * 0.6) {
          const t = clip(contentText(a).replace(PUA, ''), 400);
          // Its text beside the controls' names (longest first, so "World" does not eat
          // "World Home"; a clipped name without its ellipsis).
          const rest = textBeside(a, controls.filter((c) => c.el !== a));
          if (/[\p{L}\p{N}].*[\p{L}\p{N}].*[\p{L}\p{N}]/u.test(rest)) {
            row = { ref: refName(a), text: clip(t, 60) };
            rows.push(row);
            // A row that is itself a control is named by its text (its line is the header).
            if (self && !self.item.merged && (!self.item.name || self.item.hint)) {
              self.item.name = clip(rest, 60);
              delete self.item.hint;
            }
          }
        }
      }
      rowOf.set(a, row);
      return row;
    };
    for (const e of live) {
      if (e.item.where !== 'in' || e.item.role === 'scrollable') continue;
      const body = e.el.ownerDocument.body;
      for (let n = e.el, i = 0; n && i < 10 && n !== body && n !== e.el.ownerDocument.documentElement; n = n.parentElement, i++) {
        const row = rowFor(n);
        if (row) { e.item.row = row.ref; break; }
      }
    }
    return rows;
  }

  function lookup(ref) {
    const m = /^(?:f(\d+))?e(\d+)$/.exec(String(ref || '').trim());
    if (!m) return { error: 'bad-ref' };
    const w = S.byRef.get(+m[2]);
    const el = w && w.deref();
    if (!el || !el.isConnected) return { error: 'stale' };
    const fp = framePath(el.ownerDocument);
    if ((m[1] ? +m[1] : 0) !== (fp.length ? fp[fp.length - 1] : 0)) return { error: 'stale' };
    for (let w2 = el.ownerDocument.defaultView; w2 && w2.frameElement; w2 = w2.frameElement.ownerDocument.defaultView) {
      if (!w2.frameElement.isConnected) return { error: 'stale' };
    }
    return { el };
  }

  function target(args) {
    if (args.ref) {
      const r = lookup(args.ref);
      if (r.error) return r;
      return { el: r.el, ref: args.ref };
    }
    if (args.selector) {
      const d = scopeDoc(args);
      if (d.error) return d;
      let el;
      try { el = d.doc.querySelector(args.selector); } catch (e) { return { error: 'bad-selector', detail: String(e.message || e) }; }
      if (!el) return { error: 'no-match' };
      return { el, ref: refName(el) };
    }
    return { error: 'no-target' };
  }

  // The document a selector is matched in: this one, or (with `frame`, a frame number of the
  // latest observation, `f2` or `2`) that same-origin frame's document.
  function scopeDoc(args) {
    if (args.frame === undefined || args.frame === null || args.frame === '') return { doc: document };
    const n = String(args.frame).replace(/^f/, '');
    if (!/^\d+$/.test(n)) return { error: 'bad-frame' };
    const fe = frameElement(n);
    if (!fe) return { error: 'no-frame' };
    let doc = null;
    try { doc = fe.contentDocument; } catch (_) { doc = null; }
    if (!doc) return { error: 'no-frame' };
    return { doc };
  }

  // Scroll `el` into view and say where a real click should land, and what covers it.
  function point(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    intoViewForPointer(el);
    const st = style(el);
    const r = el.getBoundingClientRect();
    if (st.display === 'none' || st.visibility !== 'visible' || r.width <= 0 || r.height <= 0) {
      return { ref: t.ref, error: 'not-visible', what: describe(el) };
    }
    const off = frameOffset(el.ownerDocument);
    const aim = aimPoint(el, r);
    let cover = coverOf(el, r, aim);
    if (!cover) {
      // Something in a parent document may cover the frame itself.
      for (let w = el.ownerDocument.defaultView; w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
        const fe = w.frameElement;
        const c = coverOf(fe, fe.getBoundingClientRect());
        if (c) { cover = c; break; }
      }
    }
    const disabled = !!(el.disabled || el.getAttribute('aria-disabled') === 'true');
    // Whether a click here most likely navigates this tab (a same-tab link or a submit button).
    const link = el.closest('a[href], area[href]');
    const submit = (el.tagName === 'BUTTON' && (el.type || 'submit') === 'submit' && el.form)
      || (el.tagName === 'INPUT' && ['submit', 'image'].includes(el.type) && el.form);
    const navLikely = !!((link && (link.target || '_self') === '_self' && !(link.getAttribute('href') || '').startsWith('#')) || submit);
    // The visible part of the box (in its document's viewport), in top-viewport coordinates:
    // the pointer's approach enters it from outside last (pointer.rs).
    const dvw = el.ownerDocument.documentElement.clientWidth || win(el).innerWidth;
    const dvh = el.ownerDocument.documentElement.clientHeight || win(el).innerHeight;
    const bx = Math.max(r.left, 0), by = Math.max(r.top, 0);
    const box = { x: bx + off.x, y: by + off.y, w: Math.max(Math.min(r.right, dvw) - bx, 0), h: Math.max(Math.min(r.bottom, dvh) - by, 0) };
    return { ref: t.ref, navLikely, x: aim.x + off.x, y: aim.y + off.y, box, cover, disabled, tag: el.tagName.toLowerCase(), what: describe(el) };
  }

  // Controls that can sit inside another clickable element (a filter box in a column header).
  const NESTED_CONTROL = 'input, select, textarea, button, a[href], [contenteditable=""], [contenteditable="true"], [role="button"], [role="textbox"], [role="searchbox"], [role="combobox"], [role="checkbox"], [role="switch"], [role="link"]';

  // The innermost element at viewport point (x, y) of `doc`, through open shadow roots.
  function hitAt(doc, x, y) {
    let hit = doc.elementFromPoint(x, y);
    for (let i = 0; hit && hit.shadowRoot && i < 16; i++) {
      const inner = shadowHit(hit.shadowRoot, x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    return hit;
  }

  // Where a person would click `el`: its centre, unless the centre lands in a control nested in
  // `el` (clicking a header must sort, not focus its filter box); then the point of `el` nearest
  // the centre (on a 9x7 grid over its visible box) that hits `el` outside any nested control.
  // When there is none, or the centre hits something that is not part of `el` (a cover, which
  // the caller reports), the centre. Viewport coordinates of `el`'s document.
  function aimPoint(el, r) {
    const c = { x: r.left + r.width / 2, y: r.top + r.height / 2 };
    const doc = el.ownerDocument;
    // The control between the hit element and `el` (null: none; undefined: not inside `el`).
    const nested = (hit) => {
      let ctl = null;
      for (let n = hit, i = 0; n && i < 64; n = n.parentNode || n.host, i++) {
        if (n === el) return ctl;
        if (!ctl && n.nodeType === 1 && n.matches(NESTED_CONTROL)) ctl = n;
      }
      if (hit && hit.tagName === 'LABEL' && hit.control === el) return null;
      return undefined;
    };
    const vw = doc.documentElement.clientWidth || win(el).innerWidth;
    const vh = doc.documentElement.clientHeight || win(el).innerHeight;
    if (c.x < 0 || c.y < 0 || c.x >= vw || c.y >= vh) return c;
    const atCentre = nested(hitAt(doc, c.x, c.y));
    if (!atCentre) return c;
    const x0 = Math.max(r.left, 0), x1 = Math.min(r.right, vw), y0 = Math.max(r.top, 0), y1 = Math.min(r.bottom, vh);
    const pts = [];
    for (let i = 0; i < 9; i++) {
      for (let j = 0; j < 7; j++) pts.push({ x: x0 + (x1 - x0) * (i + 0.5) / 9, y: y0 + (y1 - y0) * (j + 0.5) / 7 });
    }
    pts.sort((a, b) => Math.hypot(a.x - c.x, a.y - c.y) - Math.hypot(b.x - c.x, b.y - c.y));
    for (const p of pts) {
      if (nested(hitAt(doc, p.x, p.y)) === null) return p;
    }
    return c;
  }

  // Input types whose value has a fixed format and a segmented or picker editor: filled
  // through the input's own value (setTyped), not by typing keys.
  const TYPED_INPUTS = ['date', 'time', 'datetime-local', 'month', 'week', 'color'];

  function prepareFill(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    if (el.tagName === 'INPUT' && TYPED_INPUTS.includes((el.type || '').toLowerCase())) {
      if (el.disabled || el.readOnly) return { ref: t.ref, error: 'disabled', what: describe(el) };
      const why = sensitivity(el);
      if (why && !args.allowSensitive) return { ref: t.ref, error: 'sensitive', why };
      return { ref: t.ref, typed: el.type.toLowerCase() };
    }
    const editable = (el.tagName === 'INPUT' && !['checkbox', 'radio', 'button', 'submit', 'reset', 'image', 'file', 'hidden', 'range', 'color'].includes((el.type || '').toLowerCase()))
      || el.tagName === 'TEXTAREA' || el.isContentEditable;
    if (!editable) return { ref: t.ref, error: 'not-editable', what: describe(el) };
    if (el.disabled || el.readOnly) return { ref: t.ref, error: 'disabled', what: describe(el) };
    const sens = sensitivity(el);
    if (sens && !args.allowSensitive) return { ref: t.ref, error: 'sensitive', why: sens };
    el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    el.focus();
    let hadValue = false;
    if (el.isContentEditable) {
      const sel = win(el).getSelection();
      const range = el.ownerDocument.createRange();
      range.selectNodeContents(el);
      sel.removeAllRanges(); sel.addRange(range);
      hadValue = el.textContent.length > 0;
    } else {
      try { el.select(); } catch (_) { /* not selectable */ }
      try { el.setSelectionRange(0, el.value.length); } catch (_) { /* type without selection (email, number) */ }
      hadValue = el.value.length > 0;
    }
    const active = el.getRootNode().activeElement || el.ownerDocument.activeElement;
    // Inside a contenteditable region the focus sits on its editing host, an ancestor of `el`.
    const focused = el.ownerDocument.activeElement === el || active === el
      || !!(el.isContentEditable && active && active.isContentEditable && active.contains(el));
    // The field's own frame origin (location is unforgeable; this runs in forge's isolated world
    // of the document that owns the element): browser_fill {secret} types only on bound origins.
    let origin = '';
    try { origin = String(win(el).location.origin); } catch (_) { origin = ''; }
    return { ref: t.ref, hadValue, focused, sensitive: !!sens, origin };
  }

  // A non-password field that holds a forge secret is drawn like a password field (discs), so
  // screenshots never show the value; what the field holds is unchanged.
  function maskSecretField(args) {
    const t = target(args);
    if (t.error) return t;
    t.el.style.setProperty('-webkit-text-security', 'disc', 'important');
    return { ref: t.ref, masked: true };
  }

  // Set a date/time/colour input to `args.value` (already in the type's format) the way its own
  // editor does: focus it, set the value through HTMLInputElement's own setter (this world's
  // prototype: a page that wraps the instance's setter, as React does, still sees the input
  // event), then `input` and `change`. Returns what the field reads back.
  function setTyped(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    if (el.tagName !== 'INPUT' || !TYPED_INPUTS.includes((el.type || '').toLowerCase())) return { ref: t.ref, error: 'not-typed' };
    if (el.disabled || el.readOnly) return { ref: t.ref, error: 'disabled', what: describe(el) };
    el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    el.focus();
    const before = el.value;
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
    setter.call(el, args.value);
    if (el.value !== before) {
      el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }
    return { ref: t.ref, type: el.type, value: el.value, valid: el.checkValidity ? el.validity.valid : true };
  }

  function valueOf(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    const v = el.isContentEditable ? el.textContent : el.value;
    return { ref: t.ref, value: (el.type === 'password') ? '(' + v.length + ' chars hidden)' : clip(v, 200), length: v.length };
  }

  function selectOption(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    if (el.tagName !== 'SELECT') return { ref: t.ref, error: 'not-select', what: describe(el) };
    if (el.disabled) return { ref: t.ref, error: 'disabled', what: describe(el) };
    const wanted = args.options;
    const opts = Array.from(el.options);
    const norm = (s) => String(s).replace(/\s+/g, ' ').trim();
    const chosen = [];
    for (const w of wanted) {
      const o = opts.find((o) => norm(o.label || o.text) === norm(w)) || opts.find((o) => o.value === w)
        || opts.find((o) => norm(o.label || o.text).toLowerCase() === norm(w).toLowerCase());
      if (!o) return { ref: t.ref, error: 'no-option', option: w, available: opts.slice(0, 30).map((o) => clip(o.label || o.text, 40)), count: opts.length };
      if (o.disabled) return { ref: t.ref, error: 'option-disabled', option: w };
      chosen.push(o);
    }
    if (chosen.length > 1 && !el.multiple) return { ref: t.ref, error: 'not-multiple' };
    el.focus();
    if (el.multiple) for (const o of opts) o.selected = chosen.includes(o);
    else el.value = chosen[0].value;
    el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
    return { ref: t.ref, selected: chosen.map((o) => clip(o.label || o.text, 60)) };
  }

  function focusRef(args) {
    const t = target(args);
    if (t.error) return t;
    t.el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    t.el.focus();
    return { ref: t.ref };
  }

  // Why typing into the focused element (through open shadow roots and same-origin frames) needs
  // the fill opt-in, or ''. Focus inside a cross-origin frame cannot be inspected: it counts.
  function focusSensitivity() {
    let a = document.activeElement;
    for (let i = 0; a && i < 64; i++) {
      if (a.shadowRoot && a.shadowRoot.activeElement) { a = a.shadowRoot.activeElement; continue; }
      if (a.tagName === 'IFRAME' || a.tagName === 'FRAME') {
        let d = null;
        try { d = a.contentDocument; } catch (_) { d = null; }
        if (!d) return { sensitive: 'focus is inside a cross-origin frame forge cannot inspect', frame: frameNumber(a) };
        if (d.activeElement && d.activeElement !== d.body) { a = d.activeElement; continue; }
      }
      break;
    }
    return { sensitive: a ? sensitivity(a) : '' };
  }

  // Whether `ref` is still the focused element of its document (and still on the page).
  function stillFocused(args) {
    const t = target(args);
    if (t.error) return { focused: false };
    const el = t.el;
    const active = el.getRootNode().activeElement || el.ownerDocument.activeElement;
    return { focused: el.ownerDocument.activeElement === el || active === el
      || !!(el.isContentEditable && active && active.isContentEditable && active.contains(el)) };
  }

  function scrollBy(args) {
    const se = document.scrollingElement || document.documentElement;
    se.scrollTop += args.pages * (document.documentElement.clientHeight || innerHeight) * 0.9;
    return { y: se.scrollTop };
  }

  function scrollTo(args) {
    const t = target(args);
    if (t.error) return t;
    t.el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    return { ref: t.ref };
  }

  function rect(args) {
    if (!args.selector) return { error: 'no-target' };
    let el;
    try { el = document.querySelector(args.selector); } catch (e) { return { error: 'bad-selector', detail: String(e.message || e) }; }
    if (!el) return { error: 'no-match' };
    el.scrollIntoView({ block: 'nearest', behavior: 'instant' });
    const r = el.getBoundingClientRect();
    return { x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height };
  }

  // Readable text of `root` (markdown-like: headings, list items, links, paragraphs).
  function readable(root) {
    let out = '';
    const add = (s) => { out += s; };
    const blockText = (el) => {
      const tag = el.tagName;
      if (/^H[1-6]$/.test(tag)) { add('\n\n' + '#'.repeat(+tag[1]) + ' '); return; }
      if (tag === 'LI') { add('\n- '); return; }
      if (tag === 'TR') { add('\n'); return; }
      if (tag === 'TD' || tag === 'TH') { add(' | '); return; }
      if (tag === 'P' || tag === 'BLOCKQUOTE' || tag === 'PRE' || tag === 'SECTION' || tag === 'ARTICLE') { add('\n\n'); return; }
      add('\n');
    };
    const visit = (n) => {
      if (n.nodeType === 3) {
        const p = n.parentElement;
        if (p && style(p).visibility !== 'visible') return false;
        add(n.data.replace(/\s+/g, ' '));
        return false;
      }
      if (n.nodeType !== 1) return false;
      const el = n;
      if (SKIP_TAGS.has(el.tagName) || el.getAttribute('aria-hidden') === 'true') return false;
      const st = style(el);
      if (st.display === 'none') return false;
      if (el.tagName === 'BR') { add('\n'); return false; }
      if (el.tagName === 'IMG') { if (el.alt) add('[image: ' + clip(el.alt, 80) + ']'); return false; }
      if (el.tagName === 'IFRAME') {
        let child = null;
        try { child = el.contentDocument; } catch (_) { child = null; }
        if (child && child.body) { add('\n'); walk(child.body, visit, 0); add('\n'); }
        return false;
      }
      if (isBlock(st)) blockText(el);
      return true;
    };
    if (root.nodeType === 1 && root !== document.body) visit(root);
    walk(root, visit, 0);
    return out.replace(/[ \t]+\n/g, '\n').replace(/\n[ \t]+/g, '\n').replace(/\n{3,}/g, '\n\n').replace(/[ \t]{2,}/g, ' ').trim();
  }

  function extract(args) {
    const scope = scopeDoc(args);
    if (scope.error) return scope;
    const sd = scope.doc;
    let root = sd.body || sd.documentElement;
    if (args.selector) {
      try { root = sd.querySelector(args.selector); } catch (e) { return { error: 'bad-selector', detail: String(e.message || e) }; }
      if (!root) return { error: 'no-match' };
    }
    if (args.mode === 'html') {
      if (!args.selector) return { error: 'html-needs-selector' };
      if (root === sd.documentElement || root === sd.body || root === sd.head) return { error: 'html-whole-page' };
      return { content: root.outerHTML };
    }
    if (args.mode === 'links') {
      const lines = [];
      const seen = new Set();
      const visit = (n) => {
        if (n.nodeType !== 1) return false;
        const el = n;
        if (SKIP_TAGS.has(el.tagName)) return false;
        const st = style(el);
        if (st.display === 'none' || el.getAttribute('aria-hidden') === 'true') return false;
        if (el.tagName === 'IFRAME') {
          let child = null;
          try { child = el.contentDocument; } catch (_) { child = null; }
          if (child && child.body) walk(child.body, visit, 0);
          return false;
        }
        if ((el.tagName === 'A' || el.tagName === 'AREA') && el.href && st.visibility === 'visible') {
          const key = el.href + '\u0000' + accName(el, 'link');
          if (!seen.has(key)) {
            seen.add(key);
            lines.push('- [' + (accName(el, 'link') || '(no text)') + '](' + el.href + ')');
          }
        }
        return true;
      };
      walk(root, visit, 0);
      return { content: lines.join('\n') };
    }
    return { content: readable(root) };
  }

  function waitCheck(args) {
    const w = args.waitFor;
    try { if (document.querySelector(w)) return { found: 'selector' }; } catch (_) { /* not a selector */ }
    const body = document.body ? document.body.innerText : '';
    if (body.includes(w)) return { found: 'text' };
    return { found: '' };
  }

  // Same-origin frame documents and open shadow roots (at most 30, 8 levels deep), whose JS
  // click listeners forge reads through CDP; the top document is read on its own.
  function listenerRoots() {
    const out = [];
    const scan = (root, depth) => {
      if (depth > 8) return;
      for (const el of Array.from(root.querySelectorAll('*'))) {
        if (out.length >= 30) return;
        if (el.shadowRoot) { out.push(el.shadowRoot); scan(el.shadowRoot, depth + 1); }
        if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
          let d = null;
          try { d = el.contentDocument; } catch (_) { d = null; }
          if (d && d.documentElement) { out.push(d); scan(d, depth + 1); }
        }
      }
    };
    scan(document, 0);
    return out;
  }

  // Listeners on the document, <html> or <body> are delegation, not a control.
  function markClickers(el) {
    if (el && el.nodeType === 1 && el !== el.ownerDocument.documentElement && el !== el.ownerDocument.body) S.clickers.add(el);
    return true;
  }

  // ---- action helpers (tools) ----
  // Commands only the interaction tools use (wait_for, drag, upload). They keep to this section
  // and use the shared lookup helpers (target, lookup) read-only, so the observation code above
  // can change on its own. Exported through ACTIONS below.

  // Whether `el` is hidden (not rendered, invisible or without area).
  function actHidden(el) {
    if (!el.isConnected) return true;
    if (!el.checkVisibility({ visibilityProperty: true })) return true;
    const r = el.getBoundingClientRect();
    return r.width <= 0 || r.height <= 0;
  }

  // The rendered text of `doc` and of its same-origin frames (bounded depth).
  function actText(doc, depth) {
    let t = doc.body ? doc.body.innerText : '';
    if (depth < 4) {
      for (const f of doc.querySelectorAll('iframe, frame')) {
        let child = null;
        try { child = f.contentDocument; } catch (_) { child = null; }
        if (child) t += '\n' + actText(child, depth + 1);
      }
    }
    return t;
  }

  // wait_for conditions: {text} appears in the rendered text; {gone: ref} is detached or hidden.
  function waitState(args) {
    if (typeof args.text === 'string') {
      // Occurrences in the rendered text, and which document they were counted in: with a
      // baseline ({before, doc}) the text must appear anew (more of it, or any in a new document).
      const hay = actText(document, 0);
      let count = 0;
      for (let i = args.text ? hay.indexOf(args.text) : -1; i >= 0 && count < 10000; i = hay.indexOf(args.text, i + args.text.length)) count++;
      const doc = performance.timeOrigin;
      let met = count > 0;
      if (typeof args.before === 'number') met = doc !== args.doc ? count > 0 : count > args.before;
      return { met, count, doc };
    }
    if (typeof args.gone === 'string') {
      const r = lookup(args.gone);
      if (r.error === 'stale') return { met: true };
      if (r.error) return r;
      return { met: actHidden(r.el) };
    }
    return { error: 'no-condition' };
  }

  // The centre of `el` in the top viewport (through same-origin frames).
  function actCentre(el) {
    const r = el.getBoundingClientRect();
    const off = frameOffset(el.ownerDocument);
    return { x: r.left + r.width / 2 + off.x, y: r.top + r.height / 2 + off.y };
  }

  // The box of `el` (top-viewport position and size), for saying what a drag moved.
  function actBox(el) {
    const r = el.getBoundingClientRect();
    const off = frameOffset(el.ownerDocument);
    return { x: r.left + off.x, y: r.top + off.y, w: r.width, h: r.height };
  }

  // Where a drag presses and releases: {from, to} ({ref} or {selector} each) or {from, by: {x, y}}.
  // Scrolls `from` into view, then (when the end is outside the viewport) the page so both ends
  // are in view; a drag longer than the viewport is refused ('too-far').
  function dragPlan(args) {
    const f = target(args.from || {});
    if (f.error) return { error: f.error, which: 'from' };
    let t = null;
    if (args.to) {
      t = target(args.to);
      if (t.error) return { error: t.error, which: 'to' };
    }
    const el = f.el;
    intoViewForPointer(el);
    if (actHidden(el)) return { error: 'not-visible', which: 'from', ref: f.ref };
    if (t && actHidden(t.el)) return { error: 'not-visible', which: 'to', ref: t.ref };
    const by = args.by || { x: 0, y: 0 };
    const ends = () => {
      const a = actCentre(el);
      const b = t ? actCentre(t.el) : { x: a.x + by.x, y: a.y + by.y };
      return [a, b];
    };
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    const inView = (p) => p.x >= 0 && p.y >= 0 && p.x < vw && p.y < vh;
    let [a, b] = ends();
    if (!inView(b)) {
      // The window's scrollBy: the library's own `scrollBy` command takes {pages}.
      window.scrollBy((a.x + b.x) / 2 - vw / 2, (a.y + b.y) / 2 - vh / 2);
      [a, b] = ends();
    }
    let far = false;
    // A target inside an inner scroll box, scrolled out of the box's visible part: a long drag
    // too (the box scrolls on the way), even where its point lies inside the window.
    if (t) {
      const c = clipOf(t.el).c;
      if (b.x < c.l || b.y < c.t || b.x >= c.r || b.y >= c.b) far = true;
    }
    if (!inView(a) || !inView(b)) {
      // Longer than one viewport: put `from` near the side the drag leaves from (20% in), so
      // the travel towards the other side is as long as it can be; the drag then scrolls the
      // page as it goes (dragGoal tells where the end is after each step).
      const [a0, b0] = [a, b];
      const sx = Math.abs(b0.x - a0.x) > vw * 0.6 ? a0.x - (b0.x > a0.x ? vw * 0.2 : vw * 0.8) : 0;
      const sy = Math.abs(b0.y - a0.y) > vh * 0.6 ? a0.y - (b0.y > a0.y ? vh * 0.2 : vh * 0.8) : 0;
      window.scrollBy(sx, sy);
      [a, b] = ends();
      if (!inView(a)) return { error: 'too-far', ref: f.ref, dx: b.x - a.x, dy: b.y - a.y, vw, vh };
      far = true;
    }
    // Where the drag ends, kept so that a long drag can ask again after scrolling: the target
    // element, or the `by` end as a document position.
    S.dragGoal = t ? { el: new WeakRef(t.el) } : { x: b.x + scrollX, y: b.y + scrollY };
    const r = el.getBoundingClientRect();
    const draggable = !!(el.closest('[draggable="true"]') || (el.draggable && el.getAttribute('draggable') !== 'false'));
    // The list the dragged element is an item of (its parent, when that holds two or more
    // siblings of its kind), kept to report the order after the drop; and the element's own
    // container, to report a resize made through a grip inside it.
    const item = listItemOf(el);
    S.dragList = item ? new WeakRef(item.parentElement) : null;
    S.dragItem = item ? new WeakRef(item) : null;
    S.dragFrom = new WeakRef(el);
    S.dragContainer = el.parentElement ? new WeakRef(el.parentElement) : null;
    return {
      from: { x: a.x, y: a.y, ref: f.ref },
      to: { x: b.x, y: b.y, ref: t ? t.ref : '', box: t ? actBox(t.el) : null },
      cover: coverOf(el, r),
      draggable,
      far,
      box: actBox(el),
      list: item ? listOrder(item.parentElement) : null,
      index: item ? listIndex(item.parentElement, item) : null,
      container: el.parentElement ? actBox(el.parentElement) : null,
    };
  }

  // The part of the viewport where `el` can be seen (`c`: left, top, right, bottom): the
  // viewport cut by each ancestor in its document that clips its overflow (an inner scroll
  // box); `scroller`, the innermost of those that can scroll (null: only the window does).
  function clipOf(el) {
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    let c = { l: 0, t: 0, r: vw, b: vh }, scroller = null, inner = false;
    const doc = el.ownerDocument;
    for (let n = el.parentElement, i = 0; n && n !== doc.body && n !== doc.documentElement && i < 64; n = n.parentElement, i++) {
      const cs = style(n);
      if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
      const r = n.getBoundingClientRect();
      const l = r.left + n.clientLeft, t = r.top + n.clientTop;
      c = { l: Math.max(c.l, l), t: Math.max(c.t, t), r: Math.min(c.r, l + n.clientWidth), b: Math.min(c.b, t + n.clientHeight) };
      inner = true;
      const scrolls = /auto|scroll/.test(cs.overflowY) && n.scrollHeight > n.clientHeight + 1
        || /auto|scroll/.test(cs.overflowX) && n.scrollWidth > n.clientWidth + 1;
      if (!scroller && scrolls) scroller = n;
    }
    return { c, scroller, inner };
  }

  // Where a long drag's end is now (top-viewport point, the target's box), whether it is in view
  // (24 px inside the edges of the part of the viewport it can be seen in: `clip`, cut by an
  // inner scroll box), the viewport, and the scroll position (`sx`, `sy`: the window's plus
  // the inner scroll box's, so that any scrolling shows).
  function dragGoal() {
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    const g = S.dragGoal;
    if (!g) return { error: 'no-goal' };
    let p, box = null, cl = { c: { l: 0, t: 0, r: vw, b: vh }, scroller: null, inner: false };
    if (g.el) {
      const el = g.el.deref();
      if (!el || !el.isConnected) return { error: 'stale' };
      p = actCentre(el); box = actBox(el); cl = clipOf(el);
    } else {
      p = { x: g.x - scrollX, y: g.y - scrollY };
    }
    const c = cl.c, sc = cl.scroller;
    const m = cl.inner ? Math.min(24, (c.r - c.l) / 4, (c.b - c.t) / 4) : 24;
    const inView = p.x >= c.l + m && p.y >= c.t + m && p.x < c.r - m && p.y < c.b - m;
    return { x: p.x, y: p.y, box, inView, vw, vh, clip: { x: c.l, y: c.t, w: c.r - c.l, h: c.b - c.t, inner: cl.inner },
      sx: scrollX + (sc ? sc.scrollLeft : 0), sy: scrollY + (sc ? sc.scrollTop : 0) };
  }

  // Scroll towards a long drag's end by half a view (args.x, args.y: the signs of the way): the
  // inner scroll box that hides it, or else the window. For a drag whose page scrolls neither
  // by itself nor by the wheel, and for native drags (a browser scrolls during those itself).
  function dragNudge(args) {
    const g = S.dragGoal;
    const el = g && g.el && g.el.deref();
    const sc = el && el.isConnected ? clipOf(el).scroller : null;
    const sx = Math.sign(+args.x || 0), sy = Math.sign(+args.y || 0);
    if (sc) sc.scrollBy(sx * sc.clientWidth / 2, sy * sc.clientHeight / 2);
    else window.scrollBy(sx * (document.documentElement.clientWidth || innerWidth) / 2, sy * (document.documentElement.clientHeight || innerHeight) / 2);
    return { inner: !!sc };
  }

  // Whether the element a drag pressed (dragPlan's `from`) is draggable now: pages such as
  // SortableJS set `draggable` only in their pointer-down handler.
  function pressedDraggable() {
    const el = S.dragFrom && S.dragFrom.deref();
    return { draggable: !!(el && el.isConnected && (el.closest('[draggable="true"]') || (el.draggable && el.getAttribute('draggable') !== 'false'))) };
  }

  // `el` or its nearest ancestor (at most 4 up) that is one of two or more siblings of the same
  // tag and class: the item of a list.
  function listItemOf(el) {
    for (let n = el, i = 0; n && n.parentElement && i < 5; n = n.parentElement, i++) {
      if (n.tagName === 'BODY' || n.tagName === 'HTML') return null;
      const kin = Array.from(n.parentElement.children).filter((c) => c.tagName === n.tagName && c.getAttribute('class') === n.getAttribute('class'));
      if (kin.length >= 2) return n;
    }
    return null;
  }

  // The position of `item` among the visible items of `list` (0-based), or -1.
  function listIndex(list, item) {
    return Array.from(list.children).filter((c) => !actHidden(c)).indexOf(item);
  }

  // The visible items of `list` in document order, each by its text (clipped), at most 30.
  function listOrder(list) {
    return Array.from(list.children).filter((c) => !actHidden(c)).slice(0, 30)
      .map((c) => clip(c.innerText || c.textContent || '', 40));
  }

  // The box of a ref now (after a drag), or {gone: true}.
  function boxOf(args) {
    const r = lookup(args.ref);
    const list = S.dragList && S.dragList.deref();
    const cont = S.dragContainer && S.dragContainer.deref();
    const item = S.dragItem && S.dragItem.deref();
    const extra = {
      list: list && list.isConnected ? listOrder(list) : null,
      index: list && item && list.isConnected ? listIndex(list, item) : null,
      count: list && list.isConnected ? Array.from(list.children).filter((c) => !actHidden(c)).length : null,
      container: cont && cont.isConnected ? actBox(cont) : null,
    };
    if (r.error) return Object.assign({ gone: true }, extra);
    return Object.assign(actBox(r.el), extra);
  }

  // The file input for browser_upload: {ref} or {selector}; must be an enabled <input type=file>.
  function uploadTarget(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    if (!(el.tagName === 'INPUT' && el.type === 'file')) return { error: 'not-file-input', ref: t.ref, what: describe(el) };
    if (el.disabled) return { error: 'disabled', ref: t.ref };
    return { ref: t.ref, multiple: !!el.multiple, accept: el.accept || '' };
  }

  // The element itself (the caller asks for a remote object, not a value).
  function elementOf(args) {
    const t = target(args);
    return t.error ? null : t.el;
  }

  // What the page now says about a file input's files (names and sizes, for the status).
  function filesOf(args) {
    const t = target(args);
    if (t.error) return t;
    const files = Array.prototype.map.call(t.el.files || [], (f) => ({ name: f.name, size: f.size }));
    return { files };
  }

  const ACTIONS = { waitState, dragPlan, boxOf, pressedDraggable, dragGoal, dragNudge, uploadTarget, elementOf, filesOf };
  // ---- end of action helpers (tools) ----


  // --- Cross-origin frames (frames.rs walks and drives them through the frame's own context).
  // The iframe element of frame number `n`, or null when it is gone.
  function frameElement(n) {
    const w = S.frameEls.get(+n);
    const fe = w && w.deref();
    return fe && fe.isConnected ? fe : null;
  }

  // Where frame `frame`'s content box is in the top viewport, whether this library can reach
  // into it, and (with `inner`, a point in the frame's own viewport) that point in the top
  // viewport, scrolled into view when `scroll`, and what covers it there.
  function frameBox(args) {
    const fe = frameElement(args.frame);
    if (!fe) return { error: 'stale' };
    let reachable = false;
    try { reachable = !!fe.contentDocument; } catch (_) { reachable = false; }
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    const place = () => {
      const r = fe.getBoundingClientRect();
      const cs = style(fe);
      const off = frameOffset(fe.ownerDocument);
      return { x: r.left + fe.clientLeft + (parseFloat(cs.paddingLeft) || 0) + off.x,
        y: r.top + fe.clientTop + (parseFloat(cs.paddingTop) || 0) + off.y, off };
    };
    let p = place();
    const out = { frame: 'f' + (+args.frame), reachable, box: { x: p.x, y: p.y, width: fe.clientWidth, height: fe.clientHeight } };
    const inner = args.inner;
    if (!inner) return out;
    let px = p.x + inner.x, py = p.y + inner.y;
    if (args.scroll && (px < 0 || py < 0 || px >= vw || py >= vh)) {
      out.scrolled = true;
      fe.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      p = place(); px = p.x + inner.x; py = p.y + inner.y;
      if (px < 0 || py < 0 || px >= vw || py >= vh) {
        window.scrollBy(px - vw / 2, py - vh / 2);
        p = place(); px = p.x + inner.x; py = p.y + inner.y;
      }
    }
    out.box = { x: p.x, y: p.y, width: fe.clientWidth, height: fe.clientHeight };
    out.x = px; out.y = py;
    let cover = '';
    if (inner.x < 0 || inner.y < 0 || inner.x >= fe.clientWidth || inner.y >= fe.clientHeight) {
      cover = 'the edge of ' + describe(fe) + ' (the point is outside the frame)';
    } else if (px < 0 || py < 0 || px >= vw || py >= vh) {
      cover = 'the edge of the viewport';
    } else {
      const doc = fe.ownerDocument;
      const lx = px - p.off.x, ly = py - p.off.y;
      let hit = doc.elementFromPoint(lx, ly);
      for (let i = 0; hit && hit !== fe && hit.shadowRoot && i < 16; i++) {
        const deeper = shadowHit(hit.shadowRoot, lx, ly);
        if (!deeper || deeper === hit) break;
        hit = deeper;
      }
      if (hit && hit !== fe) cover = describe(hit);
      for (let w = doc.defaultView; !cover && w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
        const c = coverOf(w.frameElement, w.frameElement.getBoundingClientRect());
        if (c) cover = c;
      }
    }
    out.cover = cover;
    return out;
  }

  // ---- action helpers: select_text, scroll ----
  // Used by tools/select_text.rs (selectTextPlan, selectionText) and tools/scroll.rs (scrollPlan,
  // scrollState, scrollSet). Everything they return that comes from the page (texts, `describe`)
  // is fenced by the Rust side.

  const noWs = (s) => String(s == null ? '' : s).replace(/\s+/g, '');
  const MAX_SELECT_CHARS = 200000;

  // The next node up: parent element, or the host of a shadow root.
  function upOf(e) {
    return e.parentElement || (e.getRootNode && e.getRootNode().host) || null;
  }

  // Rendered text of `root` as its non-space characters, each mapped to [text node, offset].
  // Matching ignores whitespace, so text that wraps, spans blocks or is indented still matches.
  function flatText(root) {
    const doc = root.ownerDocument;
    const tw = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let s = '';
    const map = [];
    const seen = new Map(); // parent element -> rendered?
    for (let n = tw.nextNode(); n && s.length < MAX_SELECT_CHARS; n = tw.nextNode()) {
      const p = n.parentElement;
      if (!p || SKIP_TAGS.has(p.tagName) || p.tagName === 'OPTION') continue;
      let shown = seen.get(p);
      if (shown === undefined) {
        shown = p.checkVisibility({ visibilityProperty: true, contentVisibilityAuto: true }) && !ariaHidden(p);
        seen.set(p, shown);
      }
      if (!shown) continue;
      const d = n.data;
      for (let i = 0; i < d.length && s.length < MAX_SELECT_CHARS; i++) {
        const c = d[i];
        if (c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '\f' || c === '\u00a0' || /\s/.test(c)) continue;
        s += c;
        map.push([n, i]);
      }
    }
    return { s, map };
  }

  // Offsets of `needle` in `hay` (non-overlapping), at most 1000.
  function occurrences(hay, needle) {
    const out = [];
    if (!needle) return out;
    for (let i = hay.indexOf(needle); i >= 0 && out.length < 1000; i = hay.indexOf(needle, i + needle.length)) out.push(i);
    return out;
  }

  // The client rect of one character (the first with an area), or null.
  function charRect(node, offset) {
    const doc = node.ownerDocument;
    const r = doc.createRange();
    const code = node.data.charCodeAt(offset);
    const end = Math.min(node.data.length, offset + (code >= 0xd800 && code <= 0xdbff ? 2 : 1));
    r.setStart(node, offset);
    r.setEnd(node, end);
    for (const rc of Array.from(r.getClientRects())) if (rc.width > 0 && rc.height > 0) return rc;
    return null;
  }

  function isPageScroller(e) {
    const doc = e.ownerDocument;
    return e === (doc.scrollingElement || doc.documentElement);
  }

  // The inner box of a scroll container in its document's viewport coordinates.
  function innerBox(c) {
    const doc = c.ownerDocument;
    if (isPageScroller(c)) {
      const w = doc.documentElement.clientWidth || win(c).innerWidth;
      const h = doc.documentElement.clientHeight || win(c).innerHeight;
      return { left: 0, top: 0, right: w, bottom: h };
    }
    const r = c.getBoundingClientRect();
    const left = r.left + c.clientLeft, top = r.top + c.clientTop;
    return { left, top, right: left + c.clientWidth, bottom: top + c.clientHeight };
  }

  // Whether `e` scrolls along `axis` ('x', 'y' or 'any') by more than a pixel.
  function scrolls(e, axis) {
    const doc = e.ownerDocument;
    if (isPageScroller(e)) {
      const box = innerBox(e);
      const y = e.scrollHeight - (box.bottom - box.top) > 1;
      const x = e.scrollWidth - (box.right - box.left) > 1;
      return axis === 'y' ? y : (axis === 'x' ? x : x || y);
    }
    // The body's overflow moves to the viewport when <html> has none of its own.
    if (e === doc.body && style(doc.documentElement).overflow === 'visible') return false;
    const st = style(e);
    const ok = (o) => o === 'auto' || o === 'scroll' || o === 'overlay';
    const y = ok(st.overflowY) && e.scrollHeight - e.clientHeight > 1;
    const x = ok(st.overflowX) && e.scrollWidth - e.clientWidth > 1;
    return axis === 'y' ? y : (axis === 'x' ? x : x || y);
  }

  // The scroll containers around `node`, innermost first, ending with the document's scroller.
  function scrollersOf(node) {
    const out = [];
    const doc = node.ownerDocument;
    for (let e = node.nodeType === 1 ? node : upOf(node), i = 0; e && i < 256; e = upOf(e), i++) {
      if (e === doc.documentElement) break;
      if (scrolls(e, 'any')) out.push(e);
    }
    out.push(doc.scrollingElement || doc.documentElement);
    return out;
  }

  // Scroll every container around `node` so the rect `rectOf()` returns is centred in it (when
  // it is not already inside), then bring enclosing frames into view.
  function reveal(node, rectOf) {
    revealWithin(node, rectOf);
    for (let w = node.ownerDocument.defaultView; w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
      w.frameElement.scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'instant' });
    }
  }

  // The scrolling part of `reveal`: only the containers of `node`'s own document.
  function revealWithin(node, rectOf) {
    for (const c of scrollersOf(node)) {
      const r = rectOf();
      if (!r) return;
      const b = innerBox(c);
      if (r.top < b.top || r.bottom > b.bottom) c.scrollTop += (r.top + r.bottom) / 2 - (b.top + b.bottom) / 2;
      if (r.left < b.left || r.right > b.right) c.scrollLeft += (r.left + r.right) / 2 - (b.left + b.right) / 2;
    }
  }

  // Whether this document is a frame of another origin than its parent's (in Chromium, a frame
  // in another process).
  function crossOriginChild() {
    if (window.top === window) return false;
    try { return !window.parent.document; } catch (_) { return true; }
  }

  // Scroll `el` into view for a pointer action (click, hover, drag): centred, and its enclosing
  // frames too, up to the top page. In a frame of another origin than its parent, only this
  // document's containers (and those of same-origin frames between `el` and this document) move:
  // Chromium carries an element's scrollIntoView on to the embedding page through the browser
  // process, after this call has returned, so the frame would move after the top page measured
  // where it is. The top page's `frameBox` scrolls the frame into view itself, and forge waits for
  // that scroll to be painted before the pointer moves (frames.rs).
  function intoViewForPointer(el) {
    if (!crossOriginChild()) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      for (let w = el.ownerDocument.defaultView; w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
        w.frameElement.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      }
      return;
    }
    for (let node = el, i = 0; node && i < 16; i++) {
      const n = node;
      revealWithin(n, () => n.getBoundingClientRect());
      node = n.ownerDocument.defaultView.frameElement;
    }
  }

  // Whether the point (document coordinates) is inside the top viewport and hits `node`'s element.
  function pointHits(node, x, y) {
    const doc = node.ownerDocument;
    const off = frameOffset(doc);
    const vw = document.documentElement.clientWidth || innerWidth;
    const vh = document.documentElement.clientHeight || innerHeight;
    const tx = x + off.x, ty = y + off.y;
    if (tx < 0 || ty < 0 || tx >= vw || ty >= vh) return { inView: false, cover: '' };
    let hit = doc.elementFromPoint(x, y);
    for (let i = 0; hit && hit.shadowRoot && i < 16; i++) {
      const inner = shadowHit(hit.shadowRoot, x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    const p = node.nodeType === 1 ? node : node.parentElement;
    if (!hit) return { inView: true, cover: '' };
    for (let n = hit; n; n = n.parentNode || n.host) { if (n === p) return { inView: true, cover: '' }; }
    if (p && p.contains(hit)) return { inView: true, cover: '' };
    return { inView: true, cover: describe(hit) };
  }

  // Find `text` (occurrence `occurrence`, default the element's whole text) in the target's
  // rendered text, scroll it into view, and give the viewport points where a selecting drag
  // starts (before the first character) and ends (after the last). `phase: 'end'` reveals the
  // last character instead (for a selection taller than the viewport).
  function selectTextPlan(args) {
    const t = target(args);
    if (t.error) return t;
    const el = t.el;
    if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return { ref: t.ref, error: 'form-field' };
    if (!el.checkVisibility({ visibilityProperty: true })) return { ref: t.ref, error: 'not-visible' };
    const flat = flatText(el);
    if (!flat.s) return { ref: t.ref, error: 'no-text' };
    const want = args.text == null ? '' : noWs(args.text);
    if (args.text != null && !want) return { ref: t.ref, error: 'empty-text' };
    let start = 0, len = flat.s.length, count = 1;
    const occurrence = Math.max(1, Math.floor(+args.occurrence || 1));
    if (want) {
      const hits = occurrences(flat.s, want);
      count = hits.length;
      if (!hits.length || occurrence > hits.length) {
        const folded = occurrences(flat.s.toLowerCase(), want.toLowerCase()).length;
        return { ref: t.ref, error: 'not-found', count: hits.length, ignoringCase: folded, excerpt: textOf(el, 160) };
      }
      start = hits[occurrence - 1];
      len = want.length;
    } else if (occurrence > 1) {
      return { ref: t.ref, error: 'not-found', count: 1, ignoringCase: 1, excerpt: textOf(el, 160) };
    }
    const [sn, so] = flat.map[start];
    const [en, eo] = flat.map[start + len - 1];
    const range = el.ownerDocument.createRange();
    range.setStart(sn, so);
    range.setEnd(en, Math.min(en.data.length, eo + 1));
    const expected = range.toString();
    const off = () => frameOffset(el.ownerDocument);
    const vh = document.documentElement.clientHeight || innerHeight;
    if (args.phase === 'end') {
      reveal(en, () => charRect(en, eo));
      const er = charRect(en, eo);
      if (!er) return { ref: t.ref, error: 'not-visible' };
      const ex = er.right - Math.min(er.width * 0.2, 2), ey = er.top + er.height / 2;
      const hit = pointHits(en, ex, ey);
      return { ref: t.ref, x: ex + off().x, y: ey + off().y, inView: hit.inView, cover: hit.cover };
    }
    // The whole range when it fits in 80% of the viewport, else its first character.
    const rectOf = () => {
      const b = range.getBoundingClientRect();
      if (b.height > 0 && b.height <= vh * 0.8) return b;
      return charRect(sn, so);
    };
    reveal(sn, rectOf);
    const sr = charRect(sn, so), er = charRect(en, eo);
    if (!sr || !er) return { ref: t.ref, error: 'not-visible' };
    const sx = sr.left + Math.min(sr.width * 0.2, 2), sy = sr.top + sr.height / 2;
    const ex = er.right - Math.min(er.width * 0.2, 2), ey = er.top + er.height / 2;
    const sh = pointHits(sn, sx, sy);
    if (!sh.inView) return { ref: t.ref, error: 'not-visible' };
    if (sh.cover) return { ref: t.ref, error: 'covered', cover: sh.cover };
    const eh = pointHits(en, ex, ey);
    const o = off();
    return {
      ref: t.ref, occurrence, count, expected, chars: expected.length,
      start: { x: sx + o.x, y: sy + o.y },
      end: { x: ex + o.x, y: ey + o.y },
      endInView: eh.inView && !eh.cover,
    };
  }

  // The selection of the target's document as text.
  function selectionText(args) {
    const t = target(args);
    if (t.error) return t;
    const sel = win(t.el).getSelection();
    return { ref: t.ref, text: sel ? sel.toString() : '' };
  }

  function scrollPos(c) {
    const b = innerBox(c);
    const h = b.bottom - b.top, w = b.right - b.left;
    return {
      top: c.scrollTop, left: c.scrollLeft,
      maxTop: Math.max(0, c.scrollHeight - h), maxLeft: Math.max(0, c.scrollWidth - w),
      height: h, width: w,
    };
  }

  // The container `browser_scroll` acts on: the target itself when it scrolls along the axis,
  // else its nearest ancestor that does, else its document's scroller; without a target, the
  // page. Returns its ref, position, and the visible centre where a wheel reaches it (viewport
  // coordinates), with what covers that centre.
  function scrollPlan(args) {
    const axis = args.axis === 'x' ? 'x' : 'y';
    let c;
    if (args.ref || args.selector) {
      const t = target(args);
      if (t.error) return t;
      c = null;
      for (let e = t.el, i = 0; e && i < 256; e = upOf(e), i++) {
        if (e === e.ownerDocument.documentElement) break;
        if (scrolls(e, axis)) { c = e; break; }
      }
      if (!c) c = t.el.ownerDocument.scrollingElement || t.el.ownerDocument.documentElement;
    } else {
      c = document.scrollingElement || document.documentElement;
    }
    const doc = c.ownerDocument;
    const page = isPageScroller(c);
    const vbox = () => {
      const b = innerBox(c);
      const vw = doc.documentElement.clientWidth || win(c).innerWidth;
      const vh = doc.documentElement.clientHeight || win(c).innerHeight;
      return { left: Math.max(0, b.left), top: Math.max(0, b.top), right: Math.min(vw, b.right), bottom: Math.min(vh, b.bottom) };
    };
    let b = vbox();
    if (!page && (b.right - b.left < 4 || b.bottom - b.top < 4)) {
      c.scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'instant' });
      b = vbox();
    }
    for (let w = doc.defaultView; w && w.frameElement; w = w.frameElement.ownerDocument.defaultView) {
      w.frameElement.scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'instant' });
    }
    const visible = b.right - b.left >= 1 && b.bottom - b.top >= 1;
    const cx = (b.left + b.right) / 2, cy = (b.top + b.bottom) / 2;
    const hit = visible && !page ? pointHits(c, cx, cy) : { inView: visible, cover: '' };
    const off = frameOffset(doc);
    const fp = framePath(doc);
    return Object.assign({
      ref: refName(c), page: page && !fp.length, framePage: page && fp.length ? 'f' + fp[fp.length - 1] : '',
      x: cx + off.x, y: cy + off.y, inView: visible && hit.inView, cover: hit.cover,
    }, scrollPos(c));
  }

  function scrollState(args) {
    const t = target(args);
    if (t.error) return t;
    return Object.assign({ ref: t.ref }, scrollPos(t.el));
  }

  // Set the container's scroll position directly (the fallback when it ignores wheel events).
  function scrollSet(args) {
    const t = target(args);
    if (t.error) return t;
    const o = { behavior: 'instant' };
    if (typeof args.top === 'number') o.top = args.top;
    if (typeof args.left === 'number') o.left = args.left;
    t.el.scrollTo(o);
    return Object.assign({ ref: t.ref }, scrollPos(t.el));
  }

  const actionHelpers = { selectTextPlan, selectionText, scrollPlan, scrollState, scrollSet };
  // ---- end of action helpers: select_text, scroll ----

  return {
    frameElement, frameBox,
    observe, point, prepareFill, maskSecretField, setTyped, valueOf, selectOption, focusRef, focusSensitivity, stillFocused, scrollBy, scrollTo, rect, extract,
    waitCheck, markClickers,
    listenerRoots,
    ready: () => ({ state: document.readyState, url: location.href }),
    ...ACTIONS,
    ...actionHelpers,
  };
})()
