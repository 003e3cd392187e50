// The session timeline over htmx's ws extension, resumable: every (re)connect asks for the
// events after the last one shown, and a fragment already shown is never added twice.
// Each event lands in #timeline-events (the raw list) and carries, in a <template>, how it
// shows in the turn view; placeEvent puts that view where its data-place says
// (sessions/timeline_view.py explains the places). The server renders every piece of HTML;
// this only moves it, and appends streamed text as text.
(function () {
  function lastSeq() {
    var last = document.querySelector("#timeline-events > .ev:last-child");
    return last ? parseInt(last.dataset.seq, 10) : 0;
  }
  htmx.createWebSocket = function (url) {
    return new WebSocket(url.replace(/([?&])after=\d*/, "$1after=" + lastSeq()));
  };
  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var m = /data-seq="(\d+)"/.exec(evt.detail.message || "");
    if (m && parseInt(m[1], 10) <= lastSeq()) {
      evt.preventDefault();  // already shown
    }
  });

  function byKey(root, key) {
    return root.querySelector('[data-key="' + CSS.escape(key) + '"]');
  }

  function turnOf(view) {
    var n = view.dataset.turn, turns = document.getElementById("timeline-turns");
    if (!n) { return null; }
    var turn = turns.querySelector(':scope > .turn[data-turn="' + CSS.escape(n) + '"]');
    if (!turn) {  // its turn.queued is not on this page (it opened before a clear)
      turn = document.getElementById("turn-skeleton").content.firstElementChild.cloneNode(true);
      turn.dataset.turn = n;
      turn.querySelector(".turn-number").textContent = n;
      turns.appendChild(turn);
    }
    return turn;
  }

  // An open stream block the text joins: the one of its key, or, for a stream without
  // a key, the turn's last item if that is one.
  function openStream(items, view) {
    var kind = view.dataset.stream, key = view.dataset.key, found = null;
    if (key) {
      items.querySelectorAll('[data-stream="' + kind + '"][data-open]').forEach(function (el) {
        if (el.dataset.key === key) { found = el; }
      });
      return found;
    }
    var last = items.lastElementChild;
    return last && last.dataset.stream === kind && last.hasAttribute("data-open") &&
      !last.dataset.key ? last : null;
  }

  function seconds(from, to) {
    var ms = Date.parse(to) - Date.parse(from);
    if (!(ms >= 0)) { return ""; }
    return ms < 60000 ? (ms / 1000).toFixed(1) + " s"
      : Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }

  function patch(target, view) {
    Array.prototype.slice.call(view.children).forEach(function (part) {
      var name = part.dataset.part, old = null;
      target.querySelectorAll('[data-part="' + name + '"]').forEach(function (el) {
        if (!old && el.closest("[data-key], .turn") === target) { old = el; }
      });
      if (old) { old.replaceWith(part); } else { target.appendChild(part); }
      htmx.process(part);
    });
    if (view.dataset.state) { target.dataset.state = view.dataset.state; }
    if (view.hasAttribute("data-starts")) { target.dataset.at = view.dataset.at; }
    if (view.hasAttribute("data-ends")) {
      var took = seconds(target.dataset.at, view.dataset.at), slot = null;
      target.querySelectorAll('[data-part="duration"]').forEach(function (el) {
        if (!slot && el.closest("[data-key], .turn") === target) { slot = el; }
      });
      if (slot && took) { slot.textContent = took; }
    }
  }

  function placeEvent(ev) {
    var tpl = ev.querySelector(":scope > template.view");
    if (!tpl || !tpl.content.firstElementChild) { return; }
    var view = tpl.content.firstElementChild.cloneNode(true);
    var place = view.dataset.place, turns = document.getElementById("timeline-turns");
    if (place === "turn") {
      var known = turns.querySelector(':scope > .turn[data-turn="' + view.dataset.turn + '"]');
      if (!known) { turns.appendChild(view); htmx.process(view); }
      return;
    }
    var turn = turnOf(view);
    if (place === "patch") {
      var key = view.dataset.key;
      var target = key === "turn" ? turn : byKey(turn || turns, key);
      if (target) { patch(target, view); }
      return;
    }
    if (!turn) { turns.appendChild(view); return; }  // a note of the session
    var items = turn.querySelector(".turn-items");
    if (place === "stream") {
      var stream = openStream(items, view);
      if (stream) {
        stream.querySelector('[data-part="text"]').append(
          view.querySelector('[data-part="text"]').textContent);
        return;
      }
    } else if (place === "final") {
      var open = openStream(items, view);
      if (open) { open.replaceWith(view); return; }
    } else if (view.dataset.key) {
      var same = byKey(items, view.dataset.key);
      if (same) { same.replaceWith(view); htmx.process(view); return; }
    }
    items.appendChild(view);
    htmx.process(view);
  }

  function watch() {
    var raw = document.getElementById("timeline-events");
    if (!raw) { return; }
    raw.querySelectorAll(":scope > .ev").forEach(placeEvent);
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        change.addedNodes.forEach(function (node) {
          if (node.nodeType === 1 && node.classList.contains("ev")) { placeEvent(node); }
        });
      });
    }).observe(raw, {childList: true});
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
})();
