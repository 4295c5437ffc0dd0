// tenantq console: self-refresh of the overview, keyboard shortcuts, small form helpers.
// No framework, no build step; the server renders every fragment (escaped), this only swaps it.
(function () {
  "use strict";

  // Refresh: fetch the server-rendered fragment every N seconds and swap it in place;
  // paused while the tab is hidden; a failed fetch keeps the old numbers and says so.
  const live = document.getElementById("live");
  if (live) {
    const url = live.dataset.refreshUrl;
    const every = Math.max(1, parseFloat(live.dataset.refreshSeconds || "5")) * 1000;
    let busy = false;
    const refresh = async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(url, { headers: { "Accept": "text/html" }, cache: "no-store" });
        if (!response.ok) throw new Error("HTTP " + response.status);
        live.innerHTML = await response.text();
        live.dataset.refreshedAt = String(Date.now());
        live.dataset.refreshes = String(parseInt(live.dataset.refreshes || "0", 10) + 1);
      } catch (error) {
        const state = document.getElementById("refresh-state");
        if (state) { state.textContent = "lost contact with the console (" + error.message + "); retrying"; state.className = "lost"; }
      } finally {
        busy = false;
      }
    };
    window.setInterval(refresh, every);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
    window.tenantqRefresh = refresh;
  }

  // Keyboard: "/" focuses the job-id box; "g" then o/t/j/d goes to a page; "r" refreshes.
  const pages = { o: "/", t: "/tenants", j: "/jobs", d: "/dlq" };
  let pendingG = false;
  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "/") {
      const box = document.getElementById("jump-id");
      if (box) { event.preventDefault(); box.focus(); }
    } else if (pendingG && pages[event.key]) {
      window.location.href = pages[event.key];
    } else if (event.key === "r" && window.tenantqRefresh) {
      window.tenantqRefresh();
    }
    pendingG = event.key === "g";
  });

  // A header checkbox that selects every checkbox of a name.
  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      document.querySelectorAll('input[type=checkbox][name="' + box.dataset.selectAll + '"]')
        .forEach(function (item) { item.checked = box.checked; });
    });
  });

  // Selects that apply at once; forms that ask first.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });
})();
