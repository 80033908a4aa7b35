// The Copy buttons of the job and batch pages (admin/display.py copy_button), in a file of
// their own so that a Content-Security-Policy without 'unsafe-inline' lets them run. A button
// is shown only where the browser offers the clipboard (HTTPS, localhost).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (!navigator.clipboard) {
    return;
  }
  document.querySelectorAll("button.dbjobs-copy").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(button.dataset.copy).then(function () {
        button.textContent = button.dataset.copied;
      });
    });
  });
});
