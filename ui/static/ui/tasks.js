// The task form's "Add step" button (without a script the form has one spare step row), and the
// schedule form's next run times, asked for as one types (debounced; an answer to older input is dropped).
const steps = document.querySelector("[data-steps]");
if (steps) {
  const add = steps.querySelector("[data-add-step]");
  add.hidden = false;
  add.addEventListener("click", () => {
    const rows = steps.querySelectorAll("[data-step-row]");
    const row = rows[rows.length - 1].cloneNode(true);
    row.querySelectorAll("input, textarea, select").forEach((field) => { field.value = ""; });
    row.querySelector("[data-step-number]").textContent = String(rows.length + 1);
    add.before(row);
    row.querySelector("select").focus();
  });
}

const preview = document.querySelector("[data-preview]");
if (preview) {
  const form = preview.closest("form");
  const cron = form.elements.cron;
  const zone = form.elements.timezone;
  const list = preview.querySelector("[data-preview-list]");
  const error = preview.querySelector("[data-preview-error]");
  let timer;
  let asked = 0;
  const show = (answer) => {
    const problem = answer.error;
    error.textContent = problem ? Object.values(problem.fields ?? {}).join(" ") || problem.message : "";
    cron.setAttribute("aria-invalid", problem?.fields?.cron ? "true" : "false");
    zone.setAttribute("aria-invalid", problem?.fields?.timezone ? "true" : "false");
    list.replaceChildren(...(answer.labels ?? []).map((label, index) => {
      const time = document.createElement("time");
      time.dateTime = answer.times[index];
      time.textContent = label;
      const item = document.createElement("li");
      item.append(time);
      return item;
    }));
  };
  const update = async () => {
    const mine = ++asked;
    if (!cron.value.trim()) return show({});
    const query = new URLSearchParams({ cron: cron.value, timezone: zone.value || "UTC" });
    const response = await fetch(`${preview.dataset.url}?${query}`, {
      headers: { Accept: "application/json" }, credentials: "same-origin",
    });
    const answer = await response.json().catch(() => ({}));
    if (mine === asked) show(answer);
  };
  for (const field of [cron, zone]) {
    field.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(update, 300);
    });
  }
}
