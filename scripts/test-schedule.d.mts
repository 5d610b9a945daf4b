// Types of scripts/test-schedule.mjs (plain JavaScript: the test runner runs before any TypeScript loader).
/** A file's recorded wall seconds and, when recorded, the CPU seconds its processes took. */
export interface FileTime {
  seconds: number;
  cpu?: number;
}
export declare const UNMEASURED_SECONDS: number;
export declare const HEAVY_CORES: number;
export declare function scheduleOrder(files: string[], times: Map<string, FileTime | number>): string[];
export declare function slotsOf(time: FileTime | number | undefined, capacity: number): number;
export declare function nextFile(
  queue: string[],
  free: number,
  slots: (file: string) => number,
  estimate?: (file: string) => number,
  horizon?: number,
): string | undefined;
export declare function estimateOf(times: Map<string, FileTime | number>): (file: string) => number;
export declare function parseDurations(text: string): Map<string, FileTime>;
export declare function formatDurations(
  previous: Map<string, FileTime>,
  measured: Map<string, FileTime>,
  header: string,
): string;
export declare function reportCounts(report: string): { passed: number; failed: number; skipped: number; todo: number };
