// The session timeline over htmx's ws extension, resumable: every (re)connect asks for the
// events after the last one shown, and a fragment already shown is never added twice.
(function () {
  function lastSeq() {
    var last = document.querySelector("#timeline-events > .ev:last-child");
    return last ? parseInt(last.dataset.seq, 10) : 0;
  }
  htmx.createWebSocket = function (url) {
    return new WebSocket(url.replace(/([?&])after=\d*/, "$1after=" + lastSeq()));
  };
  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var m = /data-seq="(\d+)"/.exec(evt.detail.message || "");
    if (m && parseInt(m[1], 10) <= lastSeq()) {
      evt.preventDefault();  // already shown
    }
  });
})();
