// Behaviour the panel's markup declares with data attributes, so that no page needs an
// inline script or handler (the Content-Security-Policy allows scripts from files only).
(function () {
  // <form data-autosubmit>: submitted as soon as the page is read (the GitHub App
  // manifest goes to GitHub's form this way; its button stays for a browser without JS).
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form[data-autosubmit]");
    if (form) {
      form.submit();
    }
  });
  // <form data-confirm="Stop this ticket?">: ask before submitting.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      e.preventDefault();
    }
  }, true);
  // <form data-reset-on-success hx-post=…>: clear the form once htmx's request succeeded.
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt;
    if (form && form.hasAttribute && form.hasAttribute("data-reset-on-success") &&
        e.detail.successful) {
      form.reset();
    }
  });
})();
