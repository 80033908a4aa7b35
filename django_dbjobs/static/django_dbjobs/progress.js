// Live progress on the job list and job pages (admin/live_progress.py): while a shown job runs,
// its progress, checkpoint and status are fetched again every POLL_MS from the admin's progress/
// view and put in place, until no shown job runs. A file of its own, as copy.js is, so that a
// Content-Security-Policy without 'unsafe-inline' lets it run. The HTML comes escaped by the server.
"use strict";
(function () {
  const POLL_MS = 1500;
  // A few failures in a row (the server restarting, a lost session) end the polling.
  const MAX_FAILURES = 5;
  let failures = 0;

  function running() {
    return document.querySelectorAll("[data-dbjobs-job][data-dbjobs-running]");
  }

  function request(elements) {
    const url = new URL(elements[0].dataset.dbjobsUrl, window.location.href);
    const ids = new Set();
    const parts = new Set();
    elements.forEach(function (element) {
      ids.add(element.dataset.dbjobsJob);
      parts.add(element.dataset.dbjobsPart);
    });
    ids.forEach(function (id) {
      url.searchParams.append("id", id);
    });
    parts.forEach(function (part) {
      url.searchParams.append("part", part);
    });
    return url;
  }

  function show(elements, jobs) {
    elements.forEach(function (element) {
      const job = jobs[element.dataset.dbjobsJob];
      if (!job) {
        // Deleted meanwhile: nothing more to show.
        delete element.dataset.dbjobsRunning;
        return;
      }
      const html = job.parts[element.dataset.dbjobsPart];
      if (html !== undefined && element.innerHTML !== html) {
        element.innerHTML = html;
      }
      if (!job.running) {
        delete element.dataset.dbjobsRunning;
      }
    });
  }

  function poll() {
    const elements = running();
    if (!elements.length) {
      return;
    }
    if (document.hidden) {
      window.setTimeout(poll, POLL_MS);
      return;
    }
    fetch(request(elements), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 403 || response.status === 400) {
          failures = MAX_FAILURES;
        }
        if (!response.ok) {
          throw new Error("progress: HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        failures = 0;
        show(elements, data.jobs);
      })
      .catch(function () {
        failures += 1;
      })
      .finally(function () {
        if (failures < MAX_FAILURES) {
          window.setTimeout(poll, POLL_MS);
        }
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    window.setTimeout(poll, POLL_MS);
  });
})();
