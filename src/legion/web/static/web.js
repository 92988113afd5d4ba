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
  const typing = function () {
    const active = document.activeElement;
    return active && live.contains(active) && active.tagName === "TEXTAREA" && active.value;
  };
  // A button that asks first (drain a host): one confirm, then its form goes.
  document.addEventListener("submit", function (event) {
    const button = event.submitter;
    const asked = button && button.dataset.confirm;
    if (asked && !window.confirm(asked)) event.preventDefault();
  });
  const source = new EventSource(live.dataset.stream);
  source.addEventListener(view, function (event) {
    if (event.lastEventId === live.dataset.version) return; // shown already
    if (typing()) return; // not while the person writes an answer; the next push brings it
    live.dataset.version = event.lastEventId;
    live.innerHTML = event.data;
    fill();
    document.body.dataset.pushed = String(Number(document.body.dataset.pushed || 0) + 1);
  });
})();
