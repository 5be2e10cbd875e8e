import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { type Stack, type StackOptions, startStack, waitFor } from "./stack";

// The dashboard in Debian's Chromium, driven by playwright-core: one stack with API_TOKEN set
// and one signed-out browser page per test file.

export const CHROMIUM = "/usr/bin/chromium";
/** Whether the browser tests run here (in CI always: a missing Chromium fails them there). */
export const chromiumAvailable = existsSync(CHROMIUM) || process.env.CI === "true";
if (!chromiumAvailable) {
  console.warn(
    `e2e-dashboard: skipped — ${CHROMIUM} is missing (apt-get install -y chromium); in CI it always runs`,
  );
}

/** Screenshots land here, for people to look at. */
export const SHOTS = process.env.LOOPRUN_SHOTS_DIR ?? join(tmpdir(), "looprun-dashboard-shots");
export const TOKEN = "dashboard-e2e-token-0123456789";
/** The API's credentials, for requests the tests make beside the page. */
export const auth = { headers: { authorization: `Bearer ${TOKEN}` } };

/**
 * Waits until `expression` is truthy in the page. Not `page.waitForFunction`: it evaluates its
 * predicate with `new Function` inside the page, which the dashboard's content security policy
 * (no 'unsafe-eval') refuses; `page.evaluate` goes through the debugger, which it does not.
 */
export async function waitInPage(
  page: Page,
  expression: string,
  opts: { timeoutMs?: number; message: string },
): Promise<void> {
  await waitFor(async () => Boolean(await page.evaluate(expression)), {
    timeoutMs: opts.timeoutMs ?? 10_000,
    intervalMs: 50,
    message: opts.message,
  });
}

export interface Dashboard {
  stack: Stack;
  page: Page;
  /** Errors the page raised, and responses of 400 and more it did not expect. */
  pageErrors: string[];
  shot(name: string): Promise<Buffer>;
  textOf(selector: string): Promise<string>;
  waitText(selector: string, text: string, timeout?: number): Promise<void>;
  /** Opens the form, applies a preset (and overrides), submits; resolves with what the page shows. */
  submitForm(
    preset: string,
    overrides?: Record<string, string>,
  ): Promise<{ id?: string; error?: string }>;
  /** Signs in through the login form the first visit lands on. */
  signIn(): Promise<void>;
  /** Accepts the page's next confirm() (Playwright dismisses dialogs unless told otherwise). */
  acceptNextDialog(): void;
  close(): Promise<void>;
}

export interface DashboardOptions {
  /** Added to the stack's environment. */
  env?: StackOptions["env"];
  /**
   * Responses of 400 and more that the file's tests provoke on purpose (`pageErrors` has the
   * others). No 404 for a diff: the page asks only for those of iterations with a snapshot.
   */
  expectedErrors?: { status: number; path: RegExp }[];
}

/** Starts a stack (API_TOKEN set) and a headless Chromium on a fresh profile. */
export async function openDashboard(
  redisUrl: string,
  { env = {}, expectedErrors = [] }: DashboardOptions = {},
): Promise<Dashboard> {
  mkdirSync(SHOTS, { recursive: true });
  const stack = await startStack({
    redisUrl,
    env: { API_TOKEN: TOKEN, LOOPRUN_SSE_POLL_MS: "100", ...env },
  });
  const profile = mkdtempSync(join(tmpdir(), "looprun-chromium-"));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 1366, height: 860 },
    });
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    await stack.stop();
    throw error;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (msg) => {
    // Failed requests are judged below, by their URL.
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) {
      pageErrors.push(msg.text());
    }
  });
  page.on("response", (res) => {
    const { pathname } = new URL(res.url());
    const expected = expectedErrors.some((e) => e.status === res.status() && e.path.test(pathname));
    if (res.status() >= 400 && !expected) {
      pageErrors.push(`${res.status()} ${res.request().method()} ${pathname}`);
    }
  });

  const textOf = (selector: string) => page.locator(selector).first().innerText();
  return {
    stack,
    page,
    pageErrors,
    shot: (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true }),
    textOf,
    waitText: (selector, text, timeout = 30_000) =>
      page.locator(selector).filter({ hasText: text }).first().waitFor({ timeout }),
    async submitForm(preset, overrides = {}) {
      await page.goto(`${stack.url}/`);
      await page.click("#open-submit");
      await page.click(`[data-preset="${preset}"]`);
      for (const [name, value] of Object.entries(overrides)) {
        await page.fill(`#submit-form [name="${name}"]`, value);
      }
      await page.click("#submit-run");
      await page.waitForSelector("#notice:not([hidden]), #submit-error:not([hidden])");
      if (await page.isVisible("#submit-error")) return { error: await textOf("#submit-error") };
      return { id: (await textOf("#notice a")).trim() };
    },
    async signIn() {
      await page.goto(`${stack.url}/`);
      await page.waitForURL(`${stack.url}/login**`);
      await page.fill("#login-token", TOKEN);
      await page.click("#login-form button[type=submit]");
      await page.waitForURL(`${stack.url}/`);
    },
    acceptNextDialog: () => page.once("dialog", (dialog) => void dialog.accept()),
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
      await stack.stop();
    },
  };
}

/** Every file under `dir` (relative path → contents). */
export function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(dir, path)] = readFileSync(path, "utf8");
    }
  };
  walk(dir);
  return out;
}
