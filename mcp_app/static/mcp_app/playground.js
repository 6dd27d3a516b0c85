// The admin playground's small enhancements; every form works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // A declined or cancelled elicitation sends no content: its fields are disabled, so the
  // browser neither checks nor posts them.
  for (const asked of document.querySelectorAll(".mcp-asked[data-actions]")) {
    const fields = asked.querySelector(".mcp-fields");
    if (!fields) {
      continue;
    }
    const sync = () => {
      const chosen = asked.querySelector(".mcp-action:checked");
      fields.disabled = Boolean(chosen) && chosen.value !== "accept";
    };
    for (const radio of asked.querySelectorAll(".mcp-action")) {
      radio.addEventListener("change", sync);
    }
    sync();
  }

  // One call per click: a second submit while the first runs would call the server twice.
  for (const form of document.querySelectorAll("form.mcp-form")) {
    form.addEventListener("submit", (event) => {
      if (form.dataset.busy) {
        event.preventDefault();
        return;
      }
      form.dataset.busy = "true";
      form.setAttribute("aria-busy", "true");
    });
  }

  // After a run the response is what the person came for, unless the form has errors to fix.
  const response = document.getElementById("mcp-response");
  if (response && !document.querySelector(".errornote, .errorlist")) {
    response.scrollIntoView({ block: "start" });
  }
});

// A page restored from the back/forward cache must accept a new submit.
window.addEventListener("pageshow", () => {
  for (const form of document.querySelectorAll("form.mcp-form")) {
    delete form.dataset.busy;
    form.removeAttribute("aria-busy");
  }
});
