/* Live pages: one socket to /ws/events (the events API every client uses; the session
 * cookie authenticates it). A frame says *that* something changed; the affected regions
 * ([data-live="<url>"]) are re-rendered by the server and swapped in place — no reload.
 * Also: language switcher, confirmations, copy buttons, toasts.
 */
(function () {
  "use strict";

  const body = document.body;
  const T = JSON.parse(document.getElementById("portal-i18n").textContent);
  const fmt = (text, vars) => text.replace(/%\((\w+)\)s/g, (_, key) => String(vars[key]));
  const toasts = document.querySelector("[data-toasts]");

  function toast(text, kind) {
    if (!toasts || !text) return;
    const item = document.createElement("div");
    item.className = "toast" + (kind ? " toast-" + kind : "");
    item.setAttribute("role", "status");
    item.textContent = text;
    toasts.appendChild(item);
    setTimeout(() => item.remove(), 6000);
  }

  document.querySelectorAll("form[data-autosubmit] select").forEach((select) => {
    select.addEventListener("change", () => select.form.submit());
  });
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
  }, true);
  document.addEventListener("click", (event) => {
    const copy = event.target.closest("[data-copy]");
    if (copy && navigator.clipboard) navigator.clipboard.writeText(copy.dataset.copy).then(() => toast(T.copied));
    if (event.target.closest("[data-reload]")) window.location.reload();
  });

  if (!("eventsSince" in body.dataset)) return;

  const indicator = document.querySelector("[data-live-indicator]");
  let last = Number(body.dataset.eventsSince) || 0;
  let delay = 1000;
  const scheduled = new Map();

  function setLive(on) {
    if (!indicator) return;
    indicator.dataset.state = on ? "on" : "off";
    indicator.querySelector("[data-live-label]").textContent = on ? T.live : T.offline;
  }

  function agentOf(frame) {
    const data = frame.data || {};
    return data.agent_id || (data.relation && data.relation.agent_id) || null;
  }

  function textOf(element) {
    return element.textContent.replace(/\s+/g, " ").trim();
  }

  function itemTexts(element) {
    const texts = new Map();
    element.querySelectorAll("[data-live-item]").forEach((item) => texts.set(item.dataset.liveItem, textOf(item)));
    return texts;
  }

  function flash(element) {
    element.classList.remove("flash-update");
    void element.offsetWidth;  // restart the animation
    element.classList.add("flash-update");
  }

  async function refresh(url) {
    let data;
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      data = await response.json();
    } catch (err) {
      return;
    }
    document.querySelectorAll("[data-live]").forEach((element) => {
      if (element.dataset.live !== url) return;
      const before = textOf(element);
      const itemsBefore = itemTexts(element);
      element.innerHTML = data.html;
      if (textOf(element) !== before) {
        // Highlight what changed: the items ([data-live-item]: a card, a row) that are
        // new or read differently; a region without items is highlighted whole.
        const items = element.querySelectorAll("[data-live-item]");
        if (items.length === 0) flash(element);
        items.forEach((item) => {
          if (itemsBefore.get(item.dataset.liveItem) !== textOf(item)) flash(item);
        });
      }
      element.dataset.refreshed = String(Number(element.dataset.refreshed || 0) + 1);
    });
    if (data.poll) schedule(url, 3000);
  }

  function schedule(url, wait) {
    if (scheduled.has(url)) return;
    scheduled.set(url, setTimeout(() => { scheduled.delete(url); refresh(url); }, wait === undefined ? 120 : wait));
  }

  function refreshFor(agent) {
    document.querySelectorAll("[data-live]").forEach((element) => {
      const wanted = element.dataset.liveAgent;
      if (wanted === "*" || (agent && wanted === agent)) schedule(element.dataset.live);
    });
  }

  function announce(frame) {
    const data = frame.data || {};
    const who = data.relation && data.relation.user;
    const me = body.dataset.username;
    const messages = {
      "h2a.relation_created": who && who !== me ? fmt(T.connected, { user: who }) : "",
      "h2a.relation_updated": who && who !== me ? fmt(T.updated, { user: who }) : "",
      "h2a.relation_revoked": who && who !== me ? fmt(T.revoked, { user: who }) : "",
      "h2a.reauth_required": fmt(T.reauth, { v: data.new_manifest_version }),
      "agent.manifest_updated": fmt(T.published, { v: data.new_manifest_version }),
      "agent.telemetry_warning": fmt(T.size_warning, { v: data.manifest_version }),
      "agent.status_changed": T.status[data.status] || "",
    };
    const warn = frame.type === "h2a.reauth_required" || frame.type === "agent.telemetry_warning" ||
      (frame.type === "agent.status_changed" && data.status === "paused");
    toast(messages[frame.type], warn ? "warn" : "");
  }

  function handle(frame) {
    body.dispatchEvent(new CustomEvent("hashee:event", { detail: frame }));
    if (frame.type === "resync_required") {
      document.querySelectorAll("[data-live]").forEach((element) => schedule(element.dataset.live));
      return;
    }
    if (frame.type === "message.new") return;
    const agent = agentOf(frame);
    refreshFor(agent);
    const watcher = agent && document.querySelector('[data-watch-agent="' + agent + '"]');
    const notice = document.querySelector("[data-stale-notice]");
    if (watcher && notice && /^(h2a\.reauth_required|agent\.manifest_updated)$/.test(frame.type)) {
      notice.hidden = false;  // the page says it itself, in sight: no toast over its buttons too
      // The form below answers the version it shows, which is no longer the latest: it says so
      // and cannot be confirmed until the page is reloaded.
      document.querySelectorAll("[data-consent-form]").forEach((form) => {
        form.dataset.stale = "true";
        form.querySelectorAll("[data-allow]").forEach((button) => { button.disabled = true; });
      });
      return;
    }
    announce(frame);
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + window.location.host + "/ws/events?since=" + last);
    let ping = null;
    socket.onopen = () => {
      delay = 1000;
      setLive(true);
      ping = setInterval(() => socket.readyState === 1 && socket.send('{"type":"ping"}'), 25000);
    };
    socket.onmessage = (message) => {
      let frame;
      try { frame = JSON.parse(message.data); } catch (err) { return; }
      if (!frame || !frame.type || frame.type === "pong") return;
      if (typeof frame.id === "number") last = Math.max(last, frame.id);
      handle(frame);
    };
    socket.onclose = (event) => {
      clearInterval(ping);
      setLive(false);
      if (event.code === 4401) return;  // the session ended (logged out, deactivated): reconnecting is refused
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    };
  }

  document.querySelectorAll("[data-live][data-live-poll]").forEach((element) => schedule(element.dataset.live, 3000));
  connect();
})();
