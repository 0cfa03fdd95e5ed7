/**
 * The client that an address stands for, for limits per client: an IPv4
 * address itself, an IPv6 address's /64. One IPv6 host is given a whole /64
 * (2^64 addresses), so a limit per IPv6 address would limit nothing.
 */
import ipaddr from 'ipaddr.js';

export function addressGroup(address: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    // Not an IP address (a Unix socket's, a proxy's odd header): itself.
    return address;
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  return `${new ipaddr.IPv6([...v6.parts.slice(0, 4), 0, 0, 0, 0]).toString()}/64`;
}
