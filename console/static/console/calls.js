// The calls page's live status: a short-lived socket token (POST, CSRF checked), the socket,
// each call_status frame applied to the row of its callId, then /calls/status to catch up on
// what was sent before the socket opened. Frames for a call not on the page are ignored (a
// call placed elsewhere shows on the next load). On close: a fresh token after a backoff,
// until the token endpoint answers 401 (signed out). Without this script the page still works.
(function () {
  "use strict";
  var script = document.currentScript;
  var tokenUrl = script.dataset.tokenUrl;
  var statusUrl = script.dataset.statusUrl;
  var labels = JSON.parse(document.getElementById("call-status-labels").textContent);
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]");
  var delay = 1000;
  var stopped = false;

  function rowOf(callId) {
    var rows = document.querySelectorAll("[data-call-id]");
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].dataset.callId === callId) return rows[i];
    }
    return null;
  }

  function apply(callId, status) {
    var row = rowOf(callId);
    if (!row) return;
    var cell = row.querySelector(".call-status");
    if (cell.dataset.status === status) return;
    cell.dataset.status = status;
    cell.textContent = labels.names[status] || status;
    if (labels.terminal.indexOf(status) !== -1) {
      var cancel = row.querySelector(".call-cancel");
      if (cancel) cancel.remove();
    }
  }

  function catchUp() {
    return fetch(statusUrl, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : {}; })
      .then(function (statuses) {
        Object.keys(statuses).forEach(function (callId) { apply(callId, statuses[callId]); });
      });
  }

  function retry() {
    if (stopped) return;
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 30000);
  }

  function connect() {
    fetch(tokenUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf ? csrf.value : "" },
    })
      .then(function (response) {
        if (response.status === 401 || response.status === 403) {
          stopped = true; // signed out (or the page is stale): nothing to reconnect with
          return null;
        }
        return response.ok ? response.json() : null;
      })
      .then(function (body) {
        if (!body) return retry();
        var socket = new WebSocket(body.wsUrl);
        body = null; // the token lives no longer than it takes to connect
        socket.addEventListener("open", function () {
          delay = 1000;
          catchUp();
        });
        socket.addEventListener("message", function (event) {
          var frame;
          try { frame = JSON.parse(event.data); } catch (e) { return; }
          if (frame.type === "call_status") apply(frame.callId, frame.status);
        });
        socket.addEventListener("close", retry);
      })
      .catch(retry);
  }

  // A call placed from the browser (phone.js) gets its row at once; its statuses follow.
  document.addEventListener("relay:browser-call", function (event) {
    var list = document.querySelector("ul.calls");
    if (!list) {
      list = document.createElement("ul");
      list.className = "cards calls";
      list.setAttribute("aria-labelledby", "recent-calls");
      document.getElementById("recent-calls").after(list);
    }
    var row = document.createElement("li");
    row.className = "card call";
    row.dataset.callId = event.detail.callId;
    var heading = document.createElement("h3");
    var number = document.createElement("span");
    number.className = "number";
    number.textContent = event.detail.to;
    heading.append("To ", number);
    var line = document.createElement("p");
    line.className = "call-status-line";
    var status = document.createElement("strong");
    status.className = "call-status";
    status.dataset.status = "";
    status.setAttribute("aria-live", "polite");
    line.append("Status: ", status);
    var from = document.createElement("p");
    from.className = "muted";
    from.textContent = "From the browser";
    row.append(heading, line, from);
    list.prepend(row);
  });

  connect();
})();
