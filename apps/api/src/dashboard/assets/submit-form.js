// The "New run" dialog: presets fill the form, the form becomes a POST /api/runs body, and the
// API's answer is shown as it is — a 400 lists the fields it names.
import { ApiError, api } from "./api.js";
import { h } from "./format.js";

const FIELDS = [
  "task",
  "sessionId",
  "workspace",
  "testCommand",
  "validationCommands",
  "agentType",
  "agentCommand",
  "agentModel",
  "reviewType",
  "reviewCommand",
  "maxIterations",
  "maxMinutes",
  "maxAttempts",
  "cooldownMs",
];
const NUMBERS = ["maxIterations", "maxMinutes", "maxAttempts", "cooldownMs"];

/** The request body the form describes; empty fields are left out (the API's defaults apply). */
export function bodyFrom(form) {
  const v = Object.fromEntries(
    FIELDS.map((name) => [name, String(form.elements[name]?.value ?? "").trim()]),
  );
  const body = { task: v.task };
  if (v.sessionId) body.sessionId = v.sessionId;
  if (v.workspace) body.workspace = v.workspace;
  if (v.testCommand) body.testCommand = v.testCommand;
  const validation = v.validationCommands
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  if (validation.length > 0) body.validationCommands = validation;
  body.agent =
    v.agentType === "mistral"
      ? { type: "mistral", ...(v.agentModel ? { model: v.agentModel } : {}) }
      : { type: "command", command: v.agentCommand };
  if (v.reviewType !== "none") {
    body.review = {
      type: v.reviewType,
      ...(v.reviewType === "command" ? { command: v.reviewCommand } : {}),
    };
  }
  for (const name of NUMBERS) {
    if (v[name] !== "") body[name] = Number(v[name]);
  }
  return body;
}

function fill(form, values) {
  for (const name of FIELDS) {
    const el = form.elements[name];
    if (!el) continue;
    const value = values[name];
    el.value =
      value === undefined ? (el.tagName === "SELECT" ? el.options[0].value : "") : String(value);
  }
}

function showError(box, error) {
  box.replaceChildren();
  if (error instanceof ApiError) {
    box.append(h("strong", {}, `${error.status} ${error.code}: `), error.message);
    if (error.issues.length > 0) {
      box.append(
        h(
          "ul",
          {},
          error.issues.map((i) => h("li", {}, h("code", {}, i.path || "(body)"), ` ${i.message}`)),
        ),
      );
    }
  } else {
    box.append(h("strong", {}, "Could not reach the API: "), String(error?.message ?? error));
  }
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
}

/** Wires the dialog; `onSubmitted(created)` runs after a 202. */
export function setupSubmitForm({ onSubmitted }) {
  const dialog = document.getElementById("submit-dialog");
  const form = document.getElementById("submit-form");
  const errorBox = document.getElementById("submit-error");
  const preview = document.getElementById("body-preview");
  const note = document.getElementById("preset-note");
  const submit = document.getElementById("submit-run");
  const presets = JSON.parse(document.getElementById("presets-data").textContent);

  const sync = () => {
    const agentType = form.elements.agentType.value;
    const reviewType = form.elements.reviewType.value;
    form.querySelector(".field-agentCommand").hidden = agentType !== "command";
    form.querySelector(".field-agentModel").hidden = agentType !== "mistral";
    form.querySelector(".field-reviewCommand").hidden = reviewType !== "command";
    preview.textContent = JSON.stringify(bodyFrom(form), null, 2);
  };
  const open = () => {
    errorBox.hidden = true;
    sync();
    if (!dialog.open) dialog.showModal();
  };
  const close = () => dialog.close();

  for (const button of form.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => {
      const preset = presets.find((p) => p.id === button.dataset.preset);
      fill(form, preset.values);
      for (const b of form.querySelectorAll("[data-preset]"))
        b.classList.toggle("active", b === button);
      note.textContent = preset.note;
      errorBox.hidden = true;
      sync();
    });
  }
  form.addEventListener("input", sync);
  form.addEventListener("change", sync);
  document.getElementById("close-submit").addEventListener("click", close);
  document.getElementById("cancel-submit").addEventListener("click", close);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.hidden = true;
    submit.disabled = true;
    submit.textContent = "Submitting…";
    try {
      const created = await api("POST", "/api/runs", bodyFrom(form));
      close();
      onSubmitted(created);
    } catch (error) {
      showError(errorBox, error);
    } finally {
      submit.disabled = false;
      submit.textContent = "Submit run";
    }
  });
  fill(form, presets[0]?.values ?? {});
  for (const b of form.querySelectorAll("[data-preset]"))
    b.classList.toggle("active", b.dataset.preset === presets[0]?.id);
  note.textContent = presets[0]?.note ?? "";
  return { open };
}
