// herd web: keeps a page live. The server renders every fragment (escaped); this only swaps
// them in, so the pages read the same without it.
"use strict";
(function () {
  var MAX_LINES = 2000; // the output keeps this many lines; the page's history is `herd logs`

  function live(url, handlers) {
    var source = new EventSource(url);
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (event) { handlers[name](event.data); });
    });
    source.onopen = function () { document.body.dataset.live = "yes"; };
    source.onerror = function () { document.body.dataset.live = "reconnecting"; };
    return source;
  }

  var fleet = document.getElementById("fleet");
  if (fleet) {
    live("/stream", { fleet: function (html) { fleet.innerHTML = html; } });
  }

  var output = document.getElementById("output");
  var head = document.getElementById("head");
  if (output && head) {
    var session = output.dataset.session;
    var url = "/session/" + encodeURIComponent(session) + "/stream?run=" +
      encodeURIComponent(output.dataset.run || "") + "&offset=" +
      encodeURIComponent(output.dataset.offset || "0");
    var append = function (html) {
      var follow = output.scrollTop + output.clientHeight >= output.scrollHeight - 40;
      output.insertAdjacentHTML("beforeend", html);
      var text = output.textContent;
      var lines = text.split("\n");
      if (lines.length > MAX_LINES + 1) {
        output.textContent = lines.slice(lines.length - MAX_LINES - 1).join("\n");
      }
      if (follow) { output.scrollTop = output.scrollHeight; }
    };
    live(url, {
      head: function (html) { head.innerHTML = html; },
      lines: append,
      run: function (run) {
        output.dataset.run = run;
        output.insertAdjacentText("beforeend", "-- herd: run " + run + " began --\n");
        var title = document.querySelector("#output-section h2");
        if (title) { title.textContent = "output of run " + run; }
      }
    });
    output.scrollTop = output.scrollHeight;
  }
})();
