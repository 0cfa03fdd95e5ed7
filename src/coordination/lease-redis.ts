/**
 * Leases in Redis, for servers that share a Redis (`REDIS_URL`). Taking,
 * renewing and releasing are each one Lua script, so no step can act on a
 * lease that passed to another holder between a read and a write; Redis's own
 * clock expires the key, so the servers' clocks do not matter. Siblings:
 * `lease-memory.ts` (one process), `lease-database.ts` (no Redis).
 */
import type { Redis } from 'ioredis';
import type { Lease, LeaseOptions } from './lease.js';

// KEYS[1] the lease (a hash: holder, token), KEYS[2] the name's token counter; ARGV: holder, ttl ms.
const ACQUIRE = `
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('HGET', KEYS[1], 'token'))
end
if holder then return false end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
`;

const RELEASE = `
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

export class RedisLease implements Lease {
  private readonly key: string;
  private readonly tokenKey: string;

  /** `prefix` namespaces the keys (one per app); the lease lives at `<prefix>lease:<name>`. */
  constructor(
    private readonly redis: Redis,
    private readonly options: LeaseOptions,
    prefix = 'perseid:',
  ) {
    this.key = `${prefix}lease:${options.name}`;
    this.tokenKey = `${prefix}lease-token:${options.name}`;
  }

  get name(): string {
    return this.options.name;
  }

  async acquire(): Promise<number | undefined> {
    const token = (await this.redis.eval(ACQUIRE, 2, this.key, this.tokenKey, this.options.holder, this.options.ttlMs)) as number | null;
    return token ?? undefined;
  }

  async release(): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.key, this.options.holder);
  }
}
