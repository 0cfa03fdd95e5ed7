/**
 * docs/reference/errors.md lists every error a client or app can receive: this
 * fails when the code defines one the page lacks, or the page lists one the
 * code no longer defines (as Fastify's errors test does for its reference page).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { errorCatalogue } from '../src/ddp/errors.js';
import '../src/index.js';
import '../src/accounts/index.js';
import '../src/client/index.js';

interface Row {
  id: string;
  where: string[];
  code: string;
  reason: string;
}

function documented(): Row[] {
  const page = readFileSync(new URL('../../docs/reference/errors.md', import.meta.url), 'utf8');
  const rows: Row[] = [];
  for (const line of page.split('\n')) {
    const cells = /^\|\s*`([A-Z0-9_]+)`\s*\|([^|]*)\|([^|]*)\|(.*)\|\s*$/.exec(line);
    if (!cells) continue;
    rows.push({ id: cells[1]!, where: cells[2]!.split(',').map((w) => w.trim()), code: cells[3]!.trim(), reason: cells[4]!.trim() });
  }
  return rows;
}

describe('the errors page', () => {
  const rows = documented();
  const defined = errorCatalogue();

  it('lists every error the code defines, and nothing else', () => {
    const listed = rows.map((r) => r.id).sort();
    const known = defined.map((e) => e.id).sort();
    assert.ok(known.length >= 10, `only ${known.length} errors catalogued: did the modules that define them load?`);
    assert.deepEqual(
      { missingFromPage: known.filter((id) => !listed.includes(id)), notInCode: listed.filter((id) => !known.includes(id)) },
      { missingFromPage: [], notInCode: [] },
    );
    assert.equal(new Set(listed).size, listed.length, 'an id is listed twice');
  });

  it('gives each error its code, channels and reason as defined', () => {
    for (const error of defined) {
      const row = rows.find((r) => r.id === error.id);
      if (!row) continue; // reported by the test above
      assert.deepEqual(row.where, [...error.channels], `${error.id}: where`);
      if (error.channels.includes('error')) assert.equal(row.code, '—', `${error.id}: code`);
      else assert.equal(row.code, String(error.code), `${error.id}: code`);
      const reason = error.reason === '' ? '(none' : error.reason;
      assert.ok(row.reason.startsWith(reason), `${error.id}: the page says "${row.reason}", the code "${error.reason}"`);
    }
  });
});
