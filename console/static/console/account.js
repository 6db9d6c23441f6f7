// The account page's "Copy the API key" button, shown only where the browser offers the
// clipboard; without this script the key is still there to select and copy by hand.
// A static file, not an inline script: the console's Content-Security-Policy runs no inline
// script (docs/console.md).
(function () {
  "use strict";
  var button = document.getElementById("copy-api-key");
  var status = document.getElementById("copy-status");
  var key = document.getElementById("api-key");
  if (!button || !navigator.clipboard) { return; }
  button.hidden = false;
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(key.value).then(
      function () { status.textContent = "Copied the API key."; },
      function () { status.textContent = "Could not copy: select the key and copy it."; }
    );
  });
})();
