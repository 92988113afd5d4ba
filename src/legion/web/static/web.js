// The live part of a page (<main data-live="board">) is replaced by what the server pushes
// (server-sent events) each time it changes; the server renders and escapes it. Forms in a
// pushed part get this page's CSRF token, which a part shared by every page cannot carry.
"use strict";
(function () {
  const live = document.querySelector("main[data-live]");
  const csrf = document.querySelector('meta[name="csrf-token"]');
  if (!live || !window.EventSource) return;
  const view = live.dataset.live;
  const fill = function () {
    live.querySelectorAll('input[name="csrf"]').forEach(function (input) {
      input.value = csrf ? csrf.content : "";
    });
  };
  // A person in a field of the live part (writing an answer) is not interrupted: the push
  // is held until they leave it.
  const typing = function () {
    const active = document.activeElement;
    return active && live.contains(active) && /^(TEXTAREA|INPUT)$/.test(active.tagName);
  };
  // A button that asks first (drain a host): one confirm, then its form goes.
  document.addEventListener("submit", function (event) {
    const button = event.submitter;
    const asked = button && button.dataset.confirm;
    if (asked && !window.confirm(asked)) event.preventDefault();
  });
  let waiting = null; // the last push held back while a field had the focus
  const show = function (version, html) {
    live.dataset.version = version;
    live.innerHTML = html;
    fill();
    document.body.dataset.pushed = String(Number(document.body.dataset.pushed || 0) + 1);
  };
  live.addEventListener("focusout", function () {
    setTimeout(function () {
      if (waiting && !typing()) {
        const held = waiting;
        waiting = null;
        show(held.version, held.html);
      }
    }, 0);
  });
  const source = new EventSource(live.dataset.stream);
  source.addEventListener(view, function (event) {
    if (event.lastEventId === live.dataset.version) return; // shown already
    if (typing()) {
      waiting = { version: event.lastEventId, html: event.data };
      document.body.dataset.held = String(Number(document.body.dataset.held || 0) + 1);
      return;
    }
    waiting = null;
    show(event.lastEventId, event.data);
  });
})();
