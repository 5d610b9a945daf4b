import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { CONSOLE_DIST } from "../../../src/console/index.ts";
import { requireCapability } from "../../support/requirements.ts";

export const CHROMIUM = process.env.WHARF_CHROMIUM || "/usr/bin/chromium";
const CONSOLE_DIR = path.dirname(CONSOLE_DIST);

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

/** `npm install` builds the console; a checkout whose sources changed since is rebuilt here. */
export function ensureConsoleBuilt(): void {
  const index = path.join(CONSOLE_DIST, "index.html");
  const sources = Math.max(
    newestMtime(path.join(CONSOLE_DIR, "src")),
    fs.statSync(path.join(CONSOLE_DIR, "index.html")).mtimeMs,
  );
  if (fs.existsSync(index) && fs.statSync(index).mtimeMs >= sources) return;
  const vite = path.join(CONSOLE_DIR, "..", "node_modules", "vite", "bin", "vite.js");
  const r = spawnSync(process.execPath, [vite, "build", "-c", "console/vite.config.ts"], {
    cwd: path.join(CONSOLE_DIR, ".."),
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`console build failed:\n${r.stdout}\n${r.stderr}`);
}

/** Debian's Chromium, headless, through playwright-core; null (skipped loudly) where it is missing. */
export async function launchBrowser(t: TestContext): Promise<Browser | null> {
  if (
    !requireCapability(
      t,
      fs.existsSync(CHROMIUM),
      `browser tests need Chromium at ${CHROMIUM} (apt-get install chromium)`,
    )
  )
    return null;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  t.after(() => browser.close());
  return browser;
}

/** Where screenshots go (CI keeps the folder as an artefact); printed once. */
export function screenshotDir(): string {
  const dir = process.env.WHARF_CONSOLE_SCREENSHOTS || path.join(os.tmpdir(), "wharf-console-screenshots");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

export const VIEWPORTS: Array<[string, { width: number; height: number }]> = [
  ["desktop", { width: 1280, height: 800 }],
  ["phone", { width: 390, height: 844 }],
];

/**
 * Once the page has been laid out at its new size: two animation frames, so that what a resize
 * triggers (resize observers, the renders they schedule) has run, instead of a fixed pause.
 */
async function settled(page: Page): Promise<void> {
  // A string, not a function: tsx's helpers (`__name`) do not exist in the page.
  await page.evaluate("new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))");
}

/**
 * Screenshots of the current page at a desktop and a phone width, then back to the desktop size;
 * `atEachSize` checks the page at each size too (one resize serves both).
 */
export async function shoot(page: Page, name: string, atEachSize?: (label: string) => Promise<void>): Promise<void> {
  const dir = screenshotDir();
  for (const [label, size] of VIEWPORTS) {
    await page.setViewportSize(size);
    await settled(page);
    await page.screenshot({ path: path.join(dir, `${name}-${label}.png`), fullPage: false });
    await atEachSize?.(label);
  }
  await page.setViewportSize(VIEWPORTS[0][1]);
}
