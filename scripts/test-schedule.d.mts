// Types of scripts/test-schedule.mjs (plain JavaScript: the test runner runs before any TypeScript loader).
export declare const UNMEASURED_SECONDS: number;
export declare function scheduleOrder(files: string[], seconds: Map<string, number>): string[];
export declare function parseDurations(text: string): Map<string, number>;
export declare function formatDurations(previous: Map<string, number>, measured: Map<string, number>, header: string): string;
export declare function reportCounts(report: string): { passed: number; failed: number; skipped: number; todo: number };
