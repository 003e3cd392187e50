(function () {
  // A rejected preview or save (400, 409) still shows its explanation; the draft stays as typed.
  document.addEventListener("htmx:beforeSwap", function (e) {
    var s = e.detail.xhr.status;
    if (s === 400 || s === 409 || s === 403) { e.detail.shouldSwap = true; e.detail.isError = false; }
  });
})();
