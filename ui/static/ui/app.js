// Every logged-in page: live updates over /v1/ws (no polling), the blocked-agent counter, the
// language switch, and forms that submit without leaving the page (data-async).
import { socketUrl, strings } from "./shared.js";

const blocked = new Set(JSON.parse(document.getElementById("ui-blocked").textContent));
const baseTitle = document.title;
const csrfToken = () => document.querySelector("input[name=csrfmiddlewaretoken]")?.value ?? "";

// -- language switch: the choice lives in the browser (a cookie the server reads, and localStorage,
// which brings the cookie back if it was cleared) and, for a person, with them (cocoon.models.Preference)
const rememberLanguage = (language) => {
  localStorage.setItem("cocoon.language", language);
  document.cookie = `django_language=${language}; path=/; max-age=31536000; samesite=lax`;
};
const storedLanguage = localStorage.getItem("cocoon.language");
if (storedLanguage && !document.cookie.split("; ").some((c) => c.startsWith("django_language="))) {
  rememberLanguage(storedLanguage);
  if (storedLanguage !== document.body.dataset.language) location.reload();
}
const switcher = document.querySelector("[data-language-switch]");
// The page again with ?lang=: the server keeps the choice in the cookie (so the cookie is left to it
// here: a changed choice is what it keeps for a person too) and, for a person, with them.
switcher?.addEventListener("change", () => {
  localStorage.setItem("cocoon.language", switcher.value);
  const url = new URL(location.href);
  url.searchParams.set("lang", switcher.value);
  location.assign(url);
});

// -- blocked agents: a badge, a counter in the title, and (if allowed) a notification -------------
function showBlocked() {
  const badge = document.getElementById("blocked-count");
  badge.textContent = String(blocked.size);
  badge.hidden = blocked.size === 0;
  document.title = blocked.size ? `(${blocked.size}) ${baseTitle}` : baseTitle;
}
const notifyButton = document.getElementById("notify-button");
if ("Notification" in window && Notification.permission === "default") {
  notifyButton.hidden = false;
  notifyButton.addEventListener("click", async () => {
    await Notification.requestPermission();
    notifyButton.hidden = true;
  });
}
showBlocked();

// -- live updates -----------------------------------------------------------------------------------
// A live value in the page's words (ui/labels.py), the value itself its tooltip.
function setField(root, name, value) {
  const element = root.querySelector(`[data-field="${name}"]`);
  if (!element) return;
  const words = strings.labels[name];
  element.textContent = words?.[value] ?? value;
  if (words) element.title = value;
  if (name !== "state" && name !== "status") return;
  element.className = element.className.replace(/\b(state|status)-\S+/g, "").trim();
  element.classList.add(`${name}-${value}`);
}

// "3 min": how long ago a <time data-since> was, in the page's language; kept current while it is open.
const AGE_UNITS = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
function showAge(element) {
  const seconds = Math.max(0, (Date.now() - Date.parse(element.dateTime)) / 1000);
  const [unit, size] = AGE_UNITS.find(([, length]) => seconds >= length) ?? AGE_UNITS.at(-1);
  const format = new Intl.NumberFormat(document.body.dataset.language, { style: "unit", unit, unitDisplay: "short" });
  element.textContent = format.format(Math.floor(seconds / size));
}
const showAges = () => document.querySelectorAll("time[data-since]").forEach(showAge);
showAges();
setInterval(showAges, 10_000);

function changed() {
  const notice = document.getElementById("live-notice");
  notice.replaceChildren(`${strings.changed} `);
  const link = document.createElement("a");
  link.href = location.href;
  link.textContent = strings.reload;
  notice.append(link);
  notice.hidden = false;
}

// A piece of a page as the server renders it now (an agent's card, an item of "Needs you"), added or
// swapped in live; one fetch at a time per piece, so that a burst of events adds it once.
const fetching = new Set();
async function fragment(url, place) {
  if (fetching.has(url)) return;
  fetching.add(url);
  try {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const holder = document.createElement("template");
    holder.innerHTML = (await response.text()).trim();
    const element = holder.content.firstElementChild;
    element.querySelectorAll("time[data-since]").forEach(showAge);
    place(element);
  } finally {
    fetching.delete(url);
  }
}

// A task created elsewhere (the API, a schedule) joins the list from the page's row template.
function addTaskRow(list, task, done) {
  const row = document.getElementById("task-row-template").content.firstElementChild.cloneNode(true);
  row.dataset.task = task.id;
  const link = row.querySelector("[data-field=link]");
  link.href = list.dataset.taskUrl.replace("TASK_ID", task.id);
  link.textContent = task.title;
  row.querySelector("[data-field=id]").textContent = task.id;
  row.querySelector("[data-field=progress]").textContent = `${done}/${task.steps.length}`;
  const created = row.querySelector("[data-field=createdAt]");
  created.dateTime = task.createdAt;
  created.textContent = task.createdAt.slice(0, 16);
  setField(row, "status", task.status);
  list.querySelector("tr[data-empty]")?.remove();
  list.tBodies[0].prepend(row);
}

const handlers = {
  "sandbox.updated"(event) {
    const rows = document.querySelectorAll(`[data-sandbox="${event.sandboxId}"]`);
    rows.forEach((row) => {
      setField(row, "state", event.data.state);
      for (const action of row.querySelectorAll("[data-when-state]")) {
        action.hidden = !action.dataset.whenState.split(" ").includes(event.data.state);
      }
    });
    if (!rows.length && document.querySelector("[data-live-list=sandboxes]")) changed();
  },
  "sandbox.deleted"(event) {
    document.querySelectorAll(`tr[data-sandbox="${event.sandboxId}"]`).forEach((row) => row.remove());
  },
  "agent.updated"(event) {
    const agent = event.data;
    const cards = document.querySelectorAll(`[data-agent="${agent.id}"]`);
    const cardUrl = `/agents/${encodeURIComponent(agent.id)}/card`;
    cards.forEach((card) => {
      // A card that turns blocked gets its answers, one that stops being blocked loses them: anew.
      const wasBlocked = card.classList.contains("status-blocked");
      if (card.classList.contains("card") && wasBlocked !== (agent.status === "blocked")) {
        fragment(cardUrl, (fresh) => document.querySelector(`.card[data-agent="${agent.id}"]`)?.replaceWith(fresh));
        return;
      }
      for (const name of ["name", "status", "statusSource", "rule", "screenTail"]) setField(card, name, agent[name]);
      const since = card.querySelector("time[data-since]");
      if (since) {
        since.dateTime = agent.statusSince;
        showAge(since);
      }
      if (card.classList.contains("card")) {
        card.className = card.className.replace(/\bstatus-\S+/g, "").trim() + ` status-${agent.status}`;
      }
    });
    // A paged wall shows some agents only: one of another page is no news.
    const list = document.querySelector("[data-live-list=agents]:not([data-partial])");
    const listed = list && (!list.dataset.filterSandbox || list.dataset.filterSandbox === agent.sandboxId);
    if (!cards.length && listed) {
      fragment(cardUrl, (card) => {
        if (list.querySelector(`[data-agent="${agent.id}"]`)) return;
        list.querySelector("[data-empty]")?.remove();
        agent.status === "blocked" ? list.prepend(card) : list.append(card);  // what waits for you first
      });
    }
    const wasBlocked = blocked.has(agent.id);
    agent.status === "blocked" ? blocked.add(agent.id) : blocked.delete(agent.id);
    if (agent.status === "blocked" && !wasBlocked && window.Notification?.permission === "granted") {
      new Notification(strings.blocked, { body: `${agent.name} (${agent.profile})`, tag: agent.id });
    }
    showBlocked();
  },
  "attention.updated"(event) {
    const list = document.querySelector("[data-live-list=attention]");
    if (!list) return;
    const item = event.data;
    const row = list.querySelector(`[data-item="${item.id}"]`);
    const snoozed = item.snoozedUntil && Date.parse(item.snoozedUntil) > Date.now();
    // Only the detail is updated in place: the event's title is in English, the page's in its language.
    const empty = list.parentElement.querySelector("[data-empty]");
    if (item.state !== "open" || snoozed) row?.remove();
    else if (row) setField(row, "detail", item.detail);
    else {
      const next = new URLSearchParams({ next: location.pathname + location.search });
      fragment(`/attention/${encodeURIComponent(item.id)}/item?${next}`, (fresh) => {
        if (list.querySelector(`[data-item="${item.id}"]`)) return;
        list.prepend(fresh);
        empty.hidden = true;
      });
    }
    empty.hidden = list.children.length > 0;
  },
  activity(event) {
    const list = document.querySelector("[data-live-list=activity]");
    if (!list) return;
    const { sandboxId, agentId, createdAt, message, actor } = event.data;
    if ((list.dataset.filterSandbox && list.dataset.filterSandbox !== sandboxId) ||
        (list.dataset.filterAgent && list.dataset.filterAgent !== agentId)) return;
    const item = document.createElement("li");
    const time = document.createElement("time");
    time.dateTime = createdAt;
    time.textContent = createdAt.slice(0, 19);
    const who = document.createElement("span");
    who.className = "muted";
    who.textContent = actor;
    item.append(time, ` ${message} `, who);
    list.prepend(item);
  },
  "task.updated"(event) {
    const task = event.data;
    const done = task.steps.filter((step) => step.status === "done").length;
    const rows = document.querySelectorAll(`[data-task="${task.id}"]`);
    rows.forEach((row) => {
      setField(row, "status", task.status);
      const progress = row.querySelector("[data-field=progress]");
      if (progress) progress.textContent = `${done}/${task.steps.length}`;
      task.steps.forEach((step, index) => {
        const stepRow = row.querySelector(`[data-step="${index}"]`);
        if (stepRow) setField(stepRow, "status", step.status);
      });
    });
    // The task's own page: the report, the diff and the review buttons come with the new status.
    const page = document.querySelector(`[data-task-page][data-task="${task.id}"]`);
    if (page && page.dataset.status !== task.status) changed();
    const list = document.querySelector("[data-live-list=tasks]:not([data-partial])");
    if (!rows.length && list) addTaskRow(list, task, done);
  },
  "schedule.updated"(event) {
    const schedule = event.data;
    const rows = document.querySelectorAll(`tr[data-schedule="${schedule.id}"]`);
    rows.forEach((row) => {
      for (const name of ["nextRunAt", "lastRunAt"]) {
        const cell = row.querySelector(`[data-field=${name}]`);
        cell.dateTime = schedule[name] ?? "";
        cell.textContent = (schedule[name] ?? "—").slice(0, 16);
      }
    });
    if (!rows.length && document.querySelector("[data-live-list=schedules]")) changed();
  },
  "schedule.deleted"(event) {
    document.querySelectorAll(`tr[data-schedule="${event.data.id}"]`).forEach((row) => row.remove());
  },
  // Settings → Nodes: a node's state as its checks find it, a node taken in or removed elsewhere.
  "node.updated"(event) {
    const rows = document.querySelectorAll(`tr[data-node="${event.data.id}"]`);
    rows.forEach((row) => setField(row, "state", event.data.state));
    if (!rows.length && document.querySelector("[data-nodes]")) changed();
  },
  "node.removed"(event) {
    document.querySelectorAll(`tr[data-node="${event.data.id}"]`).forEach((row) => row.remove());
  },
  "settings.updated"() {
    if (document.querySelector("[data-checklist]") || location.pathname.startsWith("/settings")) changed();
  },
};
// A checklist fix (image build, toolbox install) that finished changes the checklist.
for (const type of ["image.build", "toolbox.install"]) {
  handlers[type] = (event) => {
    if (document.querySelector("[data-checklist]") && ["done", "failed"].includes(event.data.status)) changed();
  };
}

let retry = 500;
function connect() {
  const state = document.getElementById("live-state");
  const socket = new WebSocket(socketUrl("/v1/ws", { lang: document.body.dataset.language }));
  socket.addEventListener("open", () => {
    retry = 500;
    socket.send(JSON.stringify({ id: 1, method: "events.subscribe",
      params: { types: Object.keys(handlers) } }));
  });
  socket.addEventListener("message", (message) => {
    const frame = JSON.parse(message.data);
    if (frame.id === 1 && frame.result) {
      state.textContent = strings.connected;
      state.dataset.live = "1";
    }
    if (frame.event) handlers[frame.event.type]?.(frame.event);
  });
  socket.addEventListener("close", () => {
    state.textContent = strings.disconnected;
    delete state.dataset.live;
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 10000);
  });
}
connect();

// -- forms ----------------------------------------------------------------------------------------
document.addEventListener("submit", async (submit) => {
  const form = submit.target;
  if (form.dataset.confirm && !confirm(form.dataset.confirm)) {
    submit.preventDefault();
    return;
  }
  const button = submit.submitter;
  const async = form.hasAttribute("data-async") || button?.hasAttribute("data-async-submit");
  if (!async) return;
  submit.preventDefault();
  const action = button?.getAttribute("formaction") || form.action;
  const response = await fetch(action, {
    method: "POST",
    body: new FormData(form, button),
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    credentials: "same-origin",
  });
  const answer = await response.json().catch(() => ({}));
  const output = form.querySelector("[data-result]") || document.getElementById("live-notice");
  output.hidden = false;
  output.textContent = answer.error ? answer.error.message
    : answer.result && Object.keys(answer.result).length ? `${answer.message} ${JSON.stringify(answer.result)}`
    : answer.message || strings.saved;
  const line = form.querySelector("input[name=text]");
  if (response.ok && line) line.value = "";
});
