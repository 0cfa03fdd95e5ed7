/**
 * createServer's options from JavaScript, where the compiler checks nothing: a
 * name it does not know is refused in one line saying what to write instead.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createServer, type ServerOptions } from '../src/index.js';

const guessed = (options: object) => () => createServer(options as ServerOptions);

describe('createServer options', () => {
  it('refuses a misspelt or guessed option, naming the right one or where it is set', () => {
    assert.throws(guessed({ heartbeatIntervall: 5000 }), { name: 'TypeError', message: 'createServer: unknown option "heartbeatIntervall" (did you mean heartbeatInterval?)' });
    assert.throws(guessed({ port: 4000 }), /unknown option "port" \(the port is listen\(port, host\)\)/);
    assert.throws(guessed({ dataDir: 'data' }), /unknown option "dataDir" \(the embedded store is in PERSEID_DATA_DIR/);
    assert.throws(guessed({ wibble: true }), /unknown option "wibble" \(the options are heartbeatInterval, .*, logger\)$/);
  });

  it('takes the options it has', async () => {
    const server = createServer({ heartbeatInterval: 5000, maxMessageSize: 2048, allowedOrigins: '*', contentSecurityPolicy: false, role: 'all' });
    assert.equal(server.role, 'all');
    await server.close();
  });
});
