// Calls per method, read from /metrics (each method's histogram count, summed over workers).
export async function callsPerMethod(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const calls: Record<string, number> = {};
  for (const [, labels, value] of text.matchAll(/^perseid_method_duration_seconds_count\{(.*)\} (\d+)$/gm)) {
    const method = /method="((?:[^"\\]|\\.)*)"/.exec(labels!)?.[1];
    if (method !== undefined) calls[method] = (calls[method] ?? 0) + Number(value);
  }
  return calls;
}
