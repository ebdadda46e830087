// bosun's dashboard: live updates only. Every page reads without this
// script; with it, an element with data-live="URL" takes each fragment the
// server sends (server-sent events, `html` events; `end` closes), and a
// <pre data-follow="URL"> follows a running run's log.
(function () {
  "use strict";
  if (window.EventSource) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var url = el.getAttribute("data-live");
      if (!url) { return; }
      var source = new EventSource(url);
      source.addEventListener("html", function (e) {
        if (e.data) { el.innerHTML = e.data; }
        el.setAttribute("data-updated", String(Date.now()));
      });
      source.addEventListener("end", function () { source.close(); });
    });
  }
  var log = document.querySelector("pre[data-follow]");
  if (log && window.fetch && window.TextDecoder && window.ReadableStream) {
    fetch(log.getAttribute("data-follow"), { credentials: "same-origin" }).then(function (r) {
      if (!r.ok || !r.body) { return; }
      var reader = r.body.getReader();
      var decoder = new TextDecoder();
      var first = true;
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) { log.setAttribute("data-ended", "true"); return; }
          var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
          var text = decoder.decode(chunk.value, { stream: true });
          // The stream starts at the log's beginning: it replaces the tail
          // the page was rendered with.
          if (first) { log.textContent = text; first = false; } else { log.textContent += text; }
          if (atBottom) { log.scrollTop = log.scrollHeight; }
          return pump();
        });
      }
      return pump();
    }).catch(function () { /* the page keeps what it was rendered with */ });
  }
})();
