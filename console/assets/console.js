// The console's only script: it shows times in the browser's zone (UTC stays in each time's
// title, shown on hover), follows the live part of an admin page while a rebuild or a verify
// runs, and moves the focus to the event an auditor chose. Every page works without it.
(function () {
  "use strict";
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d.getTime())) {
        t.textContent = d.toLocaleString();
      }
    });
  }
  function follow(box) {
    var url = box.getAttribute("data-live");
    function tick() {
      if (!box.querySelector("[data-running]")) {
        return;
      }
      fetch(url, { credentials: "same-origin" }).then(function (r) {
        if (r.redirected) { // the session ended: the sign-in page says why
          window.location.assign(r.url);
          return;
        }
        return r.text().then(function (html) {
          box.innerHTML = html;
          localTimes(box);
          setTimeout(tick, 1000);
        });
      }).catch(function () { setTimeout(tick, 3000); });
    }
    setTimeout(tick, 1000);
  }
  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    document.querySelectorAll("[data-live]").forEach(follow);
    var chosen = document.getElementById("selected");
    if (chosen && window.location.hash === "#selected") {
      chosen.focus();
    }
  });
})();
