// Reading a server's health and counters, as a monitoring script would.
export async function readFigures(url: string): Promise<{ status: string; sessions: number; counters: number }> {
  const health = (await (await fetch(`${url}/health`)).json()) as { status: string; sessions: number };
  const stats = (await (await fetch(`${url}/perseid/stats`)).json()) as Record<string, unknown>;
  return { status: health.status, sessions: health.sessions, counters: Object.keys(stats).length };
}
