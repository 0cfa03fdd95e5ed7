/**
 * The client that an address stands for, for limits per client: an IPv4
 * address itself, an IPv6 address's /64. One IPv6 host is given a whole /64
 * (2^64 addresses), so a limit per IPv6 address would limit nothing.
 */
import ipaddr from 'ipaddr.js';

/**
 * An address with the client's port, as some proxies write it in
 * X-Forwarded-For (Azure Application Gateway: `203.0.113.7:51234`,
 * `[2001:db8::1]:51234`): read as itself, each connection would be a client
 * of its own, and no limit per address would hold.
 */
const WITH_PORT = /^(?:\[([^\]]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):\d{1,5}$/;

export function addressGroup(address: string): string {
  const withPort = WITH_PORT.exec(address);
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(withPort ? (withPort[1] ?? withPort[2])! : address);
  } catch {
    // Not an IP address (a Unix socket's, a proxy's odd header): itself.
    return address;
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  return `${new ipaddr.IPv6([...v6.parts.slice(0, 4), 0, 0, 0, 0]).toString()}/64`;
}
