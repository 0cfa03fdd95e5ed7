/** What counts as one client for the limits per address: an IPv4 address, an IPv6 /64. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addressGroup } from '../src/server/address-group.js';

describe('addressGroup', () => {
  it('keeps an IPv4 address, also mapped into IPv6, and groups IPv6 by /64', () => {
    for (const [address, group] of [
      ['203.0.113.7', '203.0.113.7'],
      ['::ffff:203.0.113.7', '203.0.113.7'],
      ['2001:db8:7:7::1', '2001:db8:7:7::/64'],
      ['2001:0db8:0007:0007:ffff:1:2:3', '2001:db8:7:7::/64'],
      ['2001:db8:7:8::1', '2001:db8:7:8::/64'],
      ['fe80::1%eth0', 'fe80::/64'],
      ['::1', '::/64'],
      ['not an address', 'not an address'],
    ]) {
      assert.equal(addressGroup(address!), group, address);
    }
  });

  it('reads an address that a proxy wrote with the client port (Azure Application Gateway) without the port', () => {
    for (const [address, group] of [
      ['203.0.113.7:51234', '203.0.113.7'],
      ['203.0.113.7:443', '203.0.113.7'],
      ['[2001:db8:7:7::1]:51234', '2001:db8:7:7::/64'],
      ['[::ffff:203.0.113.7]:80', '203.0.113.7'],
      ['not an address:80', 'not an address:80'],
    ]) {
      assert.equal(addressGroup(address!), group, address);
    }
  });
});
