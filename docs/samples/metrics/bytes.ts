// Bytes each publication sent (before ready, and live over every subscriber), and the compression ratio, read from /metrics.
export interface PublicationBytes {
  initial: number;
  live: number;
}

export async function publicationBytes(url: string): Promise<{ publications: Record<string, PublicationBytes>; compressionRatio: number | null }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const publications: Record<string, PublicationBytes> = {};
  for (const [, when, labels, value] of text.matchAll(/^perseid_publication_(initial|live)_bytes_total\{(.*)\} (\d+)$/gm)) {
    const name = /publication="((?:[^"\\]|\\.)*)"/.exec(labels!)?.[1];
    if (name === undefined) continue;
    const row = (publications[name] ??= { initial: 0, live: 0 });
    row[when as keyof PublicationBytes] += Number(value);
  }
  // Summed over workers (a primary's scrape has a series per worker).
  const sum = (family: string) => [...text.matchAll(new RegExp(`^${family}(?:\\{.*\\})? (\\S+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
  const before = sum('perseid_compression_input_bytes_total');
  return { publications, compressionRatio: before > 0 ? sum('perseid_compression_output_bytes_total') / before : null };
}
