/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { raw } from "hono/html";
import type { Preset } from "./presets";

const field = (name: string, label: string, input: unknown, hint?: string) => (
  // biome-ignore lint/a11y/noLabelWithoutControl: the control is the `input` child
  <label class={`field field-${name}`}>
    <span>{label}</span>
    {input}
    {hint ? <small class="muted">{hint}</small> : null}
  </label>
);

/** The "New run" dialog: presets fill it, the page's script posts it and shows the API's errors. */
export function SubmitForm({ presets }: { presets: Preset[] }) {
  // JSON inside <script> must not be able to close the element.
  const presetJson = JSON.stringify(presets).replaceAll("<", "\\u003c");
  return (
    <dialog id="submit-dialog" class="dialog">
      <form id="submit-form" method="dialog" novalidate>
        <header class="dialog-head">
          <h2>New run</h2>
          <button type="button" class="link" id="close-submit" aria-label="Close">
            ✕
          </button>
        </header>
        <div class="presets">
          <span class="muted">Presets:</span>
          {presets.map((p) => (
            <button type="button" class="chip" data-preset={p.id} title={p.note}>
              {p.label}
            </button>
          ))}
        </div>
        <p id="preset-note" class="muted small" />
        <div id="submit-error" class="form-error" role="alert" hidden />
        <div class="grid2">
          {field("task", "Task", <textarea name="task" rows={2} required />)}
          {field(
            "sessionId",
            "Session",
            <input name="sessionId" placeholder="new session" />,
            "optional",
          )}
          {field(
            "workspace",
            "Workspace",
            <input name="workspace" placeholder="default: the session's" />,
            "under WORKSPACES_ROOT",
          )}
          {field("testCommand", "Test command", <input name="testCommand" class="mono" />)}
          {field(
            "validationCommands",
            "Validation commands",
            <textarea name="validationCommands" rows={2} class="mono" />,
            "one a line",
          )}
          <fieldset class="group">
            <legend>Agent</legend>
            {field(
              "agentType",
              "Type",
              <select name="agentType">
                <option value="command">command</option>
                <option value="mistral">mistral</option>
              </select>,
            )}
            {field("agentCommand", "Command", <input name="agentCommand" class="mono" />)}
            {field(
              "agentModel",
              "Model",
              <input name="agentModel" placeholder="mistral-large-latest" />,
            )}
          </fieldset>
          <fieldset class="group">
            <legend>Reviewer</legend>
            {field(
              "reviewType",
              "Type",
              <select name="reviewType">
                <option value="none">none</option>
                <option value="command">command</option>
                <option value="mistral">mistral</option>
                <option value="triangular">triangular</option>
              </select>,
            )}
            {field("reviewCommand", "Command", <input name="reviewCommand" class="mono" />)}
          </fieldset>
          <fieldset class="group budget-fields">
            <legend>Budget</legend>
            {field(
              "maxIterations",
              "Max iterations",
              <input name="maxIterations" type="number" min="1" placeholder="6" />,
            )}
            {field(
              "maxMinutes",
              "Max minutes",
              <input name="maxMinutes" type="number" min="0" step="any" placeholder="45" />,
            )}
            {field(
              "maxAttempts",
              "Max attempts (legacy)",
              <input name="maxAttempts" type="number" min="1" />,
            )}
            {field(
              "cooldownMs",
              "Cooldown (ms)",
              <input name="cooldownMs" type="number" min="0" placeholder="1000" />,
            )}
          </fieldset>
        </div>
        <details class="body-preview">
          <summary>Request body</summary>
          <pre id="body-preview" class="mono" />
        </details>
        <footer class="dialog-foot">
          <button type="button" id="cancel-submit">
            Cancel
          </button>
          <button type="submit" class="primary" id="submit-run">
            Submit run
          </button>
        </footer>
      </form>
      <script type="application/json" id="presets-data">
        {raw(presetJson)}
      </script>
    </dialog>
  );
}
