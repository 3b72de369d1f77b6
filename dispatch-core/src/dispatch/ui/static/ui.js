// Refreshes the parts of the page marked data-refresh from the same address, every 5 s,
// without reloading the page. The server escaped every value; nothing here builds HTML.
(function () {
  "use strict";
  function refresh() {
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-refresh]").forEach(function (old) {
          var name = old.getAttribute("data-refresh");
          var next = fresh.querySelector('[data-refresh="' + name + '"]');
          if (next) { old.replaceWith(document.importNode(next, true)); }
        });
      })
      .catch(function () { /* the next round tries again */ });
  }
  window.setInterval(refresh, 5000);
})();
