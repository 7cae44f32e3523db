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
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch("/approvals/rows" + query, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.status === 401) { window.location.assign("/operator/signin?next=/approvals"); return null; }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        // Keep keyboard focus on the same approval across the swap.
        var active = document.activeElement;
        var focusID = active && active.getAttribute ? active.getAttribute("data-id") : null;
        lists.innerHTML = html;
        if (focusID) {
          var same = lists.querySelector('[data-id="' + focusID + '"]');
          if (same) { same.focus(); }
        }
        var pending = document.getElementById("pending");
        if (pending && count) { count.textContent = pending.getAttribute("data-count") + " " + pending.getAttribute("data-state"); }
      })
      .catch(function () { if (state) { state.textContent = "update failed, retrying"; } })
      .then(function () {
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
