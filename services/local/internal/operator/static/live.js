// Live updates of the queue: an EventSource on /approvals/live says
// "changed", and the list fragment is fetched again with the page's own
// filters. Without EventSource it polls every 5 s. The page works without
// this script (reload by hand).
(function () {
  "use strict";
  var lists = document.getElementById("lists");
  var count = document.getElementById("pending-count");
  var state = document.getElementById("live-state");
  if (!lists) { return; }
  var query = lists.getAttribute("data-query") || "";
  var busy = false, again = false, failed = null;

  // sameRows tells whether two lists hold equal nodes once their
  // countdowns ("in 4m59s", which move every second) are set aside.
  function sameRows(a, b) {
    a = a.cloneNode(true); b = b.cloneNode(true);
    [a, b].forEach(function (n) { n.querySelectorAll(".until").forEach(function (u) { u.textContent = ""; }); });
    if (a.childNodes.length !== b.childNodes.length) { return false; }
    for (var i = 0; i < a.childNodes.length; i++) {
      if (!a.childNodes[i].isEqualNode(b.childNodes[i])) { return false; }
    }
    return true;
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    // A fetch that hangs must not stop every later update: give up after
    // 15 s and let the next "changed" (or the poll) try again.
    var abort = window.AbortController ? new AbortController() : null;
    var timer = abort ? window.setTimeout(function () { abort.abort(); }, 15000) : 0;
    fetch("/approvals/rows" + query, { credentials: "same-origin", headers: { "Accept": "text/html" }, signal: abort ? abort.signal : undefined })
      .then(function (r) {
        if (r.status === 401) { window.location.assign("/operator/signin?next=/approvals"); return null; }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        if (failed !== null) { if (state) { state.textContent = failed; } failed = null; }
        var next = document.createElement("div");
        next.innerHTML = html;
        if (sameRows(lists, next)) {
          // The same rows again (a change this filter hides, a reconnect,
          // only the countdowns moved): leave the nodes alone, so that a
          // click, a hover or a text selection in progress is not lost to
          // a swap of equal nodes; just move the countdowns.
          var olds = lists.querySelectorAll(".until"), news = next.querySelectorAll(".until");
          for (var i = 0; i < olds.length; i++) {
            if (olds[i].textContent !== news[i].textContent) { olds[i].textContent = news[i].textContent; }
          }
        } else {
          // Keep keyboard focus on the same approval across the swap.
          var active = document.activeElement;
          var focusID = active && active.getAttribute ? active.getAttribute("data-id") : null;
          lists.replaceChildren.apply(lists, Array.prototype.slice.call(next.childNodes));
          if (focusID) {
            var same = lists.querySelector('[data-id="' + focusID + '"]');
            if (same) { same.focus(); }
          }
        }
        var pending = document.getElementById("pending");
        if (pending && count) { count.textContent = pending.getAttribute("data-count") + " " + pending.getAttribute("data-state"); }
      })
      .catch(function () {
        if (failed === null) { failed = state ? state.textContent : ""; }
        if (state) { state.textContent = "update failed, retrying"; }
        window.setTimeout(refresh, 5000);
      })
      .then(function () {
        window.clearTimeout(timer);
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  if (window.EventSource) {
    var es = new EventSource("/approvals/live");
    es.addEventListener("changed", refresh);
    es.onopen = function () { if (state) { state.textContent = "live"; } };
    es.onerror = function () { if (state) { state.textContent = "reconnecting"; } };
  } else {
    window.setInterval(refresh, 5000);
  }
})();
