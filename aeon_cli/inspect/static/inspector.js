/* Aeon inspector: opening a cycle loads its details from this server (HTML the server escaped); a #c-N link opens
   cycle N; the compare button is enabled with exactly two runs ticked; a step-through page (/live) follows its run.
   Nothing is fetched from anywhere else. */
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

  /* Step-through: the buttons are plain forms (a click is one POST, sent once); the page asks the server which
     moment of the run is current and, when the run has moved, swaps in the new state (HTML the server escaped).
     A page that shows the run's end stops asking: the command has exited. */
  var leaving = false; /* a button was pressed: its answer is the next page, nothing is to be followed here */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form.controls")) return;
    if (form.dataset.sent) event.preventDefault();
    form.dataset.sent = "1";
    leaving = true;
  });

  function follow() {
    var busy = false;
    var timer = setInterval(function () {
      var live = document.getElementById("live");
      if (!live || live.dataset.mode === "finished" || live.dataset.mode === "stopped") {
        clearInterval(timer);
        return;
      }
      if (busy || leaving) return;
      busy = true;
      fetch(live.dataset.poll, { credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (!response.ok) throw new Error(response.status + " " + response.statusText);
          return response.json();
        })
        .then(function (now) {
          if (String(now.version) === live.dataset.version) return null;
          return fetch(live.dataset.fragment, { credentials: "same-origin", cache: "no-store" }).then(
            function (response) {
              if (!response.ok) throw new Error(response.status + " " + response.statusText);
              return response.text();
            }
          );
        })
        .then(function (html) {
          if (html) live.outerHTML = html; /* escaped by the server's templates */
        })
        .catch(function () {
          clearInterval(timer);
          var shown = document.getElementById("live");
          var note = document.createElement("p");
          note.className = "problem gone";
          note.textContent = "The command no longer serves this page: the run ended or the command was stopped.";
          if (shown) shown.insertBefore(note, shown.firstChild);
        })
        .then(function () {
          busy = false;
        });
    }, 300);
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (document.getElementById("live")) follow();
  });
})();
