/* Aeon inspector: opening a cycle loads its details from this server (HTML the server escaped); a #c-N link opens
   cycle N; the compare button is enabled with exactly two runs ticked. Nothing is fetched from anywhere else. */
(function () {
  "use strict";

  function load(details) {
    if (details.dataset.loaded) return;
    details.dataset.loaded = "1";
    var body = details.querySelector(".body");
    fetch(details.dataset.src, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.statusText);
        return response.text();
      })
      .then(function (html) {
        body.innerHTML = html; /* escaped by the server's templates */
        details.classList.add("loaded");
      })
      .catch(function (error) {
        body.textContent = "Could not load this cycle: " + error.message;
        delete details.dataset.loaded;
      });
  }

  /* toggle does not bubble: listen in the capture phase */
  document.addEventListener("toggle", function (event) {
    var target = event.target;
    if (target.matches && target.matches("details.cycle") && target.open) load(target);
  }, true);

  function openFromHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    var target = document.getElementById(id);
    if (target && target.matches("details.cycle")) {
      target.open = true;
      load(target);
      target.scrollIntoView({ block: "start" });
      return;
    }
    /* a cycle on another page of the timeline: go to that page */
    var timeline = document.querySelector(".timeline[data-per-page]");
    var number = /^c-(\d+)$/.exec(id);
    if (!target && timeline && number) {
      var page = Math.ceil(Number(number[1]) / Number(timeline.dataset.perPage));
      var pages = Number(timeline.dataset.pages);
      if (page >= 1 && page <= pages) location.replace("?page=" + page + "#" + id);
    }
  }
  window.addEventListener("hashchange", openFromHash);
  document.addEventListener("DOMContentLoaded", function () {
    openFromHash();
    var form = document.querySelector("form.compare");
    if (!form) return;
    var button = form.querySelector("button");
    var update = function () {
      button.disabled = form.querySelectorAll("input[name=r]:checked").length !== 2;
    };
    form.addEventListener("change", update);
    update();
  });
})();
