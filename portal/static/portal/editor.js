/* The manifest editor: validates as you type with the server's rules (the portal's
 * preview endpoint runs validate_manifest and agent_update(dry_run=True)), puts each
 * error next to its line (gutter marker + inline message) and shows the diff preview.
 * Saving stays a separate, explicit submit, carrying the hash of what was previewed.
 */
(function () {
  "use strict";

  const root = document.querySelector("[data-editor]");
  if (!root || !window.HasheeJSON) return;

  const T = JSON.parse(document.getElementById("portal-i18n").textContent);
  const fmt = (text, vars) => text.replace(/%\((\w+)\)s/g, (_, key) => String(vars[key]));
  const $ = (selector) => root.querySelector(selector);
  const textarea = $("textarea");
  const gutter = $("[data-gutter]");
  const marks = $("[data-marks]");
  const status = $("[data-editor-status]");
  const problemsEl = $("[data-problems]");
  const countEl = $("[data-problem-count]");
  const previewEl = $("[data-preview]");
  const saveBtn = $("[data-save]");
  const hashInput = $("[data-previewed-hash]");
  const meter = $("[data-size-meter]");
  const mode = root.dataset.mode;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const LINE = 20;
  const PAD = 10;
  const PAD_X = 14;  // the textarea's left padding
  const LABEL_GAP = 16;  // between a line's last character and its error label
  const DEBOUNCE_MS = 300;

  let seq = 0;
  let timer = null;
  let flagged = new Map();
  let lineCount = 0;
  let revealFirstError = false;  // set by a paste: show where its first error is
  const measure = document.createElement("canvas").getContext("2d");

  const gutterInner = document.createElement("div");
  const marksInner = document.createElement("div");
  gutter.appendChild(gutterInner);
  marks.appendChild(marksInner);

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function renderGutter() {
    const lines = textarea.value.split("\n").length;
    const parts = [];
    for (let n = 1; n <= lines; n++) {
      const flag = flagged.get(n);
      const cls = flag ? (flag.kind === "error" ? " err" : " warn") : "";
      const title = flag ? ' title="' + escapeHtml(flag.messages.join("\n")) + '"' : "";
      parts.push('<div class="ln' + cls + '" data-line="' + n + '"' + title + ">" + n + "</div>");
    }
    gutterInner.innerHTML = parts.join("");
    lineCount = lines;
  }

  function textWidth(text) {
    measure.font = getComputedStyle(textarea).font;
    return measure.measureText(text.replace(/\t/g, "  ")).width;
  }

  function renderMarks() {
    const lines = textarea.value.split("\n");
    const parts = [];
    flagged.forEach((flag, line) => {
      const extra = flag.messages.length > 1 ? " (+" + (flag.messages.length - 1) + ")" : "";
      parts.push('<div class="mark' + (flag.kind === "error" ? "" : " warn") + '" data-line="' + line +
                 '" data-left="' + Math.ceil(PAD_X + textWidth(lines[line - 1] || "") + LABEL_GAP) +
                 '"><span class="mark-msg">' + escapeHtml(flag.messages[0] + extra) + "</span></div>");
    });
    marksInner.innerHTML = parts.join("");
    // Placed through the DOM, not a style attribute: the Content Security Policy allows no inline style.
    marksInner.querySelectorAll(".mark").forEach((mark) => {
      mark.style.top = PAD + (Number(mark.dataset.line) - 1) * LINE + "px";
      mark.style.setProperty("--msg-left", mark.dataset.left + "px");  // the label starts after its line's text
    });
  }

  function syncScroll() {
    const y = "translateY(" + -textarea.scrollTop + "px)";
    gutterInner.style.transform = y;
    marksInner.style.transform = y;
    marks.style.setProperty("--scroll-x", textarea.scrollLeft + "px");
  }

  function revealFirst(problems) {
    if (!revealFirstError) return;
    revealFirstError = false;
    const lines = problems.filter((p) => p.kind === "error").map((p) => p.line);
    if (!lines.length) return;
    const line = Math.min.apply(null, lines);
    const top = PAD + (line - 1) * LINE;
    if (top < textarea.scrollTop || top + LINE > textarea.scrollTop + textarea.clientHeight) {
      textarea.scrollTop = Math.max(0, (line - 6) * LINE);
    }
    textarea.scrollLeft = 0;
    syncScroll();
  }

  function setStatus(state, text) {
    status.dataset.state = state;
    status.textContent = text;
  }

  function setSave(enabled, label, breaking) {
    if (!saveBtn) return;
    saveBtn.disabled = !enabled;
    if (label) saveBtn.textContent = label;
    saveBtn.classList.toggle("btn-danger", Boolean(breaking));
    saveBtn.classList.toggle("btn-primary", !breaking);
  }

  function setSize(size, limit, warnAt) {
    if (!meter) return;
    const bar = meter.querySelector("[data-size-bar]");
    const label = meter.querySelector("[data-size-text]");
    if (size == null) { bar.style.width = "0"; label.textContent = ""; return; }
    bar.style.width = Math.min(100, (100 * size) / limit).toFixed(1) + "%";
    label.textContent = (size < 1024 ? size + " B" : (size / 1024).toFixed(1) + " KB") + " / " + Math.round(limit / 1024) + " KB";
    meter.dataset.level = size > limit ? "over" : size >= warnAt ? "warn" : "ok";
  }

  function jumpTo(line) {
    const lines = textarea.value.split("\n");
    let start = 0;
    for (let n = 1; n < line; n++) start += lines[n - 1].length + 1;
    textarea.focus();
    textarea.setSelectionRange(start, start + (lines[line - 1] || "").length);
    textarea.scrollTop = Math.max(0, (line - 6) * LINE);
    syncScroll();
  }

  function renderProblems(problems) {
    const errors = problems.filter((p) => p.kind === "error").length;
    const warnings = problems.length - errors;
    const counts = [];
    if (errors) counts.push(errors === 1 ? T.errors_one : fmt(T.errors_many, { n: errors }));
    if (warnings) counts.push(warnings === 1 ? T.warnings_one : fmt(T.warnings_many, { n: warnings }));
    countEl.textContent = counts.join(" · ");
    if (!problems.length) {
      problemsEl.innerHTML = '<p class="ok-line">✓ ' + escapeHtml(T.no_problems) + "</p>";
      return;
    }
    problemsEl.innerHTML = '<ul class="problems">' + problems.map((p) =>
      '<li class="problem problem-' + p.kind + '" data-line="' + p.line + '" data-pointer="' + escapeHtml(p.path) + '">' +
      '<div class="problem-where"><span class="problem-line">' + escapeHtml(fmt(T.line, { n: p.line })) + "</span>" +
      "<code>" + escapeHtml(p.path || "/") + '</code><span class="problem-code">' + escapeHtml(p.code) + "</span></div>" +
      "<p>" + escapeHtml(p.message) + "</p></li>").join("") + "</ul>";
  }

  function show(problems) {
    flagged = new Map();
    problems.forEach((p) => {
      const flag = flagged.get(p.line);
      if (!flag) flagged.set(p.line, { kind: p.kind, messages: [p.message] });
      else {
        if (p.kind === "error" && flag.kind !== "error") { flag.kind = "error"; flag.messages.unshift(p.message); }
        else flag.messages.push(p.message);
      }
    });
    renderGutter();
    renderMarks();
    syncScroll();
    renderProblems(problems);
    revealFirst(problems);
  }

  function syntaxMessage(error) {
    // In the page's language: jsonlocate gives a code and its arguments beside its English text.
    const args = Object.assign({}, error.args);
    if (args.what) args.what = T.json_expected[args.what] || args.what;
    const text = T.json[error.code] ? fmt(T.json[error.code], args) : error.message;
    return text + " (" + fmt(T.line_column, { n: error.line, c: error.column }) + ")";
  }

  function syntaxLine(message, fallback) {
    const match = /line (\d+)/.exec(message || "");
    return match ? Number(match[1]) : fallback;
  }

  function render(data, located) {
    const problems = [];
    if (data.syntax_error) {
      problems.push({ kind: "error", path: "", code: "MALFORMED_JSON", message: data.syntax_error,
                      line: syntaxLine(data.syntax_error, 1) });
    } else {
      data.errors.forEach((e) => problems.push({ kind: "error", path: e.path, code: e.code, message: e.message, line: located.lineOf(e.path) }));
    }
    data.warnings.forEach((w) => problems.push({ kind: "warning", path: w.path, code: w.code, message: w.message, line: located.lineOf(w.path) }));
    show(problems);
    previewEl.innerHTML = data.html;
    setSize(data.size_bytes, data.size_limit, data.size_warn_at);
    if (hashInput) hashInput.value = data.valid ? data.hash : "";
    const errors = problems.filter((p) => p.kind === "error").length;
    if (errors) setStatus("error", errors === 1 ? T.errors_one : fmt(T.errors_many, { n: errors }));
    else setStatus("ok", T.valid);
    if (mode === "create") setSave(data.valid, T.create, false);
    else if (!data.valid) setSave(false, T.fix_first, false);
    else if (data.unchanged) setSave(false, T.nothing_to_save, false);
    else setSave(true, fmt(data.breaking ? T.save_breaking : T.save, { v: data.version }), data.breaking);
    root.dataset.checked = String(seq);
  }

  async function check() {
    const text = textarea.value;
    const mine = ++seq;
    if (mode === "create" && !text.trim()) {
      show([]);
      previewEl.innerHTML = "";
      setStatus("ok", "");
      setSave(true, T.create, false);
      return;
    }
    const located = window.HasheeJSON.locate(text);
    if (!located.ok) {
      const e = located.error;
      show([{ kind: "error", path: "", code: "MALFORMED_JSON", line: e.line, message: syntaxMessage(e) }]);
      setStatus("error", T.syntax);
      setSize(null);
      previewEl.innerHTML = "";
      setSave(false, mode === "create" ? T.create : T.fix_first, false);
      root.dataset.checked = String(mine);
      return;
    }
    const base = root.dataset.baseVersion;
    let data;
    try {
      const response = await fetch(root.dataset.previewUrl + (base ? "?base_version=" + encodeURIComponent(base) : ""), {
        method: "POST", credentials: "same-origin", body: text,
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
      });
      if (!response.ok) throw new Error("HTTP " + response.status);
      data = await response.json();
    } catch (err) {
      if (mine === seq) setStatus("error", T.offline);
      return;
    }
    if (mine === seq) render(data, located);
  }

  function schedule() {
    clearTimeout(timer);
    setStatus("busy", T.checking);
    setSave(false, null, false);
    timer = setTimeout(check, DEBOUNCE_MS);
  }

  textarea.addEventListener("input", (event) => {
    if (/^insertFrom(Paste|Drop)/.test(event.inputType || "")) revealFirstError = true;
    if (textarea.value.split("\n").length !== lineCount) renderGutter();
    syncScroll();
    schedule();
  });
  textarea.addEventListener("scroll", syncScroll);
  problemsEl.addEventListener("click", (event) => {
    const item = event.target.closest("[data-line]");
    if (item) jumpTo(Number(item.dataset.line));
  });
  const formatBtn = root.querySelector("[data-format]");
  if (formatBtn) {
    formatBtn.addEventListener("click", () => {
      if (!window.HasheeJSON.locate(textarea.value).ok) return;
      textarea.value = JSON.stringify(JSON.parse(textarea.value), null, 2);
      renderGutter();
      schedule();
    });
  }
  // The standard device tools (SPEC §12.1): one click adds the tool and its scope, unless the
  // manifest declares them already; the server then checks the result like any edit.
  const toolEntries = document.getElementById("device-tool-entries");
  root.addEventListener("click", (event) => {
    const button = event.target.closest("[data-add-device-tool]");
    if (!button || !toolEntries) return;
    if (!window.HasheeJSON.locate(textarea.value).ok) {
      setStatus("error", T.syntax);
      return;
    }
    const entries = JSON.parse(toolEntries.textContent)[button.dataset.addDeviceTool];
    const manifest = JSON.parse(textarea.value);
    if (!Array.isArray(manifest.tools)) manifest.tools = [];
    if (!Array.isArray(manifest.permission_scopes)) manifest.permission_scopes = [];
    if (!manifest.tools.some((t) => t && t.name === entries.tool.name)) manifest.tools.push(entries.tool);
    if (!manifest.permission_scopes.some((s) => s && s.id === entries.scope.id)) manifest.permission_scopes.push(entries.scope);
    textarea.value = JSON.stringify(manifest, null, 2);
    renderGutter();
    schedule();
  });
  const form = root.closest("form");
  if (form) {
    form.addEventListener("submit", (event) => {
      if (event.submitter && event.submitter.disabled) event.preventDefault();
    });
  }

  renderGutter();
  check();
})();
