// Reading a server's APM figures as a script would: the slowest method, the index advice, the capacity for 10,000 sessions.
export async function readApm(url: string, token?: string): Promise<{ slowest?: string; advice: string[]; instances: number | null }> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const get = async <T>(path: string) => (await (await fetch(url + path, { headers })).json()) as T;
  const view = await get<{ methods: Array<{ name: string; p95: number }> }>('/perseid/dashboard.json');
  const advice = await get<Array<{ line: string }>>('/perseid/advice');
  const capacity = await get<{ plan: { instances: number | null } }>('/perseid/capacity?sessions=10000&cpu=70');
  const slowest = [...view.methods].sort((a, b) => b.p95 - a.p95)[0];
  return { slowest: slowest?.name, advice: advice.map((a) => a.line), instances: capacity.plan.instances };
}
