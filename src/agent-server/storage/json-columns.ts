/** JSON text columns: parse leniently (a corrupt cell reads as the fallback, never a 500). */
export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text == null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export const asJson = (value: unknown): string => JSON.stringify(value ?? {});
