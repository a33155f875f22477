// forge watch page: lists tasks, shows one task's timeline, egress, files and result, and
// follows changes over Server-Sent Events. Everything shown is set as text (never as HTML):
// tool arguments and page content are untrusted.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let tasks = [];
  let selected = null;
  let refreshTimer = null;
  let detailTimer = null;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function ms(n) {
    if (n === null || n === undefined) return "–";
    if (n < 1000) return n + " ms";
    const s = n / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (r.status === 401) {
      window.location.reload();
      throw new Error("signed out");
    }
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  }

  function badge(state) {
    return el("span", { class: "badge state-" + state, text: state });
  }

  function renderTasks() {
    const body = $("task-rows");
    body.replaceChildren();
    $("tasks-empty").hidden = tasks.length > 0;
    for (const t of tasks) {
      const link = el("a", { href: "#task/" + encodeURIComponent(t.id), class: "prompt", text: t.prompt || "(no text)" });
      const row = el("tr", { class: t.id === selected ? "selected" : null, "data-task": t.id },
        el("td", { "data-label": "State" }, badge(t.state)),
        el("td", { "data-label": "Prompt" }, link),
        el("td", { "data-label": "Duration" }, ms(t.durationMs)),
        el("td", { "data-label": "Steps" }, String(t.steps)),
        el("td", { "data-label": "Replica", class: "replica" }, t.replica));
      body.append(row);
    }
  }

  async function refreshTasks() {
    try {
      const d = await getJSON("/ui/api/tasks");
      tasks = d.tasks || [];
      renderTasks();
    } catch (e) {
      console.warn(e);
    }
  }

  function fact(dl, name, value) {
    dl.append(el("dt", { text: name }), el("dd", {}, value));
  }

  function timelineItem(kind, title, detail, extra) {
    const li = el("li", { class: "ev ev-" + kind },
      el("span", { class: "ev-title", text: title }));
    if (extra) li.append(el("span", { class: "ev-meta", text: extra }));
    if (detail) li.append(el("pre", { class: "ev-detail", text: detail }));
    return li;
  }

  // The live image's stream may not start yet (no tab open) or may end: try again a few times.
  function liveRetry() {
    const img = $("live-img");
    const base = img.dataset.base;
    const tries = Number(img.dataset.tries || "0");
    if (!base || tries >= 30) return;
    img.dataset.tries = String(tries + 1);
    setTimeout(() => {
      if (img.dataset.base === base) img.setAttribute("src", base + "?try=" + (tries + 1));
    }, 2000);
  }

  function renderDetail(t) {
    $("detail-none").hidden = true;
    $("detail-body").hidden = false;
    $("detail-h").textContent = "Task " + t.id;
    const facts = $("facts");
    facts.replaceChildren();
    fact(facts, "State", badge(t.state));
    fact(facts, "Prompt", t.prompt || "");
    fact(facts, "Duration", ms(t.durationMs));
    fact(facts, "Steps", String(t.steps === undefined ? "–" : t.steps));
    fact(facts, "Replica", t.replica || "–");
    if (t.status) fact(facts, "Status", t.status);
    $("har-link").setAttribute("href", t.egressHar);
    const liveLink = $("live-link");
    if (t.liveView) { liveLink.setAttribute("href", t.liveView); liveLink.hidden = false; }
    else liveLink.hidden = true;
    // The live view inline: its frame stream runs while the image has a source, so a
    // finished task (or another task chosen) drops the source and the screencast stops.
    const liveImg = $("live-img");
    const liveSrc = t.liveView ? t.liveView + "/frames" : null;
    if (liveSrc) {
      if (liveImg.dataset.base !== liveSrc) {
        liveImg.dataset.base = liveSrc;
        liveImg.dataset.tries = "0";
        liveImg.setAttribute("src", liveSrc);
      }
    } else if (liveImg.hasAttribute("src")) {
      delete liveImg.dataset.base;
      liveImg.removeAttribute("src");
    }
    $("live-figure").hidden = !liveSrc;

    const res = $("result");
    res.replaceChildren();
    if (t.result) {
      res.append(el("p", {}, badge(t.result.status || "?"), " ", t.result.answer || ""));
      res.append(el("details", {}, el("summary", { text: "Result object" }),
        el("pre", { class: "ev-detail", text: JSON.stringify(t.result, null, 2) })));
    } else {
      res.append(el("p", { class: "muted", text: "Not finished yet." }));
    }

    const a = t.audit || {};
    const audit = $("audit");
    audit.replaceChildren();
    if (a.verified === true) {
      audit.append(el("span", { class: "badge ok", text: "verifies" }),
        " chain of " + a.lines + " lines in " + a.file + "; this task's " + a.taskEvents + " events are in it unchanged");
    } else if (a.verified === false) {
      audit.append(el("span", { class: "badge bad", text: "does not verify" }), " " + (a.why || ""));
    } else {
      audit.append(el("span", { class: "badge", text: "not checked" }), " " + (a.why || ""));
    }

    const arts = $("artifacts");
    arts.replaceChildren();
    for (const f of t.artifacts || []) {
      if ((f.mimeType || "").startsWith("image/")) {
        arts.append(el("figure", {},
          el("a", { href: f.url, target: "_blank", rel: "noopener" }, el("img", { src: f.url, alt: "screenshot " + f.name, loading: "lazy" })),
          el("figcaption", { text: f.name })));
      } else {
        arts.append(el("p", {}, el("a", { href: f.url, download: f.name, text: f.name }), " (" + f.mimeType + ")"));
      }
    }
    if (!arts.childNodes.length) arts.append(el("p", { class: "muted", text: "None." }));

    const eg = $("egress-rows");
    eg.replaceChildren();
    const calls = {};
    const tl = $("timeline");
    tl.replaceChildren();
    for (const e of t.events || []) {
      const time = (e.time || "").slice(11, 23);
      switch (e.event) {
        case "task_egress": {
          const host = e.port && e.port !== 443 && e.port !== 80 ? e.host + ":" + e.port : e.host;
          eg.append(el("tr", { class: "decision-" + e.decision },
            el("td", { "data-label": "Host" }, el("span", { class: "method", text: (e.method || "") + " " }), el("code", { class: "host", text: host })),
            el("td", { "data-label": "Decision" }, el("span", { class: "badge " + (e.decision === "allowed" ? "ok" : "bad"), text: e.decision })),
            el("td", { "data-label": "Rule", class: "rule", text: e.rule }),
            el("td", { "data-label": "Tool", text: e.tool + " (" + e.via + ")" }),
            el("td", { "data-label": "Time", text: ms(e.duration_ms) })));
          tl.append(timelineItem("egress " + e.decision, "egress " + e.decision + ": " + host, null, e.rule + " · " + e.tool + " · " + time));
          break;
        }
        case "session_start":
          tl.append(timelineItem("start", "task started", null, (e.model || "") + " · " + (e.tools || 0) + " tools · " + time));
          break;
        case "session_end":
          tl.append(timelineItem("end", "task ended: " + (e.status || ""), e.error || null, "iterations " + (e.iterations === undefined ? "?" : e.iterations) + " · " + ms(e.duration_ms) + " · " + time));
          break;
        case "llm_call":
          tl.append(timelineItem("model", "model turn", null, (e.model || "") + " · " + ms(e.duration_ms) + (e.output_tokens !== undefined ? " · " + e.input_tokens + "→" + e.output_tokens + " tokens" : "") + " · " + time));
          break;
        case "thought":
          tl.append(timelineItem("thought", "model says", e.text, time));
          break;
        case "tool_start": {
          const li = timelineItem("tool", "tool " + e.tool, JSON.stringify(e.arguments, null, 2), "running · " + time);
          calls[e.call_id] = li;
          tl.append(li);
          break;
        }
        case "tool_exec":
        case "mcp_tool_call": {
          const li = calls[e.call_id];
          const meta = (e.ok ? "ok" : "failed") + " · " + ms(e.duration_ms) + " · " + time;
          if (li) {
            li.classList.add(e.ok ? "ok" : "failed");
            li.querySelector(".ev-meta").textContent = meta;
            if (!e.ok && e.error) li.append(el("p", { class: "ev-error", text: e.error }));
          } else {
            tl.append(timelineItem("tool " + (e.ok ? "ok" : "failed"), "tool " + e.tool, e.ok ? null : e.error, meta));
          }
          break;
        }
        default:
          if (e.event === "egress_allowed" || e.event === "egress_blocked") break;
          tl.append(timelineItem("other", e.event, null, time));
      }
    }
    if (!eg.childNodes.length) eg.append(el("tr", {}, el("td", { colspan: "5", class: "muted", text: "No request." })));
    if (t.eventsDropped) tl.append(timelineItem("other", t.eventsDropped + " more events not kept", null, null));
  }

  async function refreshDetail() {
    if (!selected) {
      $("detail-none").hidden = false;
      $("detail-body").hidden = true;
      $("detail-h").textContent = "Task";
      return;
    }
    try {
      renderDetail(await getJSON("/ui/api/tasks/" + encodeURIComponent(selected)));
    } catch (e) {
      console.warn(e);
    }
  }

  function route() {
    const m = /^#task\/(.+)$/.exec(window.location.hash);
    const next = m ? decodeURIComponent(m[1]) : null;
    const moved = next !== selected;
    selected = next;
    renderTasks();
    refreshDetail().then(() => { if (moved && selected) $("detail").focus(); });
  }

  function soon(fn, which) {
    if (which === "list") {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(fn, 150);
    } else {
      clearTimeout(detailTimer);
      detailTimer = setTimeout(fn, 150);
    }
  }

  function connect() {
    const live = $("live");
    const es = new EventSource("/ui/api/events");
    es.addEventListener("hello", () => { live.textContent = "live"; live.className = "live on"; });
    es.addEventListener("task", (m) => {
      let id = null;
      try { id = JSON.parse(m.data).id; } catch (e) { /* ignore */ }
      soon(refreshTasks, "list");
      if (id && id === selected) soon(refreshDetail, "detail");
    });
    es.addEventListener("resync", () => { soon(refreshTasks, "list"); soon(refreshDetail, "detail"); });
    es.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
  }

  window.addEventListener("hashchange", route);
  document.addEventListener("DOMContentLoaded", () => {
    $("live-img").addEventListener("error", liveRetry);
    refreshTasks().then(route);
    connect();
  });
})();
