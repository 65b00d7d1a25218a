import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';

/** A GET sent as written: fetch would resolve dot segments before sending them. */
function rawGet(t: TestApp, path: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('console routes', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'console'] });
  });
  after(() => t.close());

  const assertSecured = (headers: { get(name: string): string | null } | Record<string, unknown>, label: string) => {
    const get = (name: string) => ('get' in headers && typeof headers.get === 'function' ? headers.get(name) : (headers as Record<string, unknown>)[name]);
    const csp = String(get('content-security-policy'));
    assert.match(csp, /default-src 'self'/, label);
    assert.match(csp, /frame-ancestors 'none'/, label);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, label);
    assert.equal(get('x-content-type-options'), 'nosniff', label);
    assert.equal(get('referrer-policy'), 'same-origin', label);
  };

  it('serves the page and its files with their types, the security headers and revalidation', async () => {
    const page = await fetch(`${t.url}/console`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    assertSecured(page.headers, 'page');
    const html = await page.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script');
    assert.doesNotMatch(html, /<style|\sstyle=/, 'no inline style');
    for (const [file, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['pages/keys.js', 'text/javascript; charset=utf-8'],
      ['console.css', 'text/css; charset=utf-8'],
    ]) {
      const response = await fetch(`${t.url}/console/${file}`);
      assert.equal(response.status, 200, file);
      assert.equal(response.headers.get('content-type'), type, file);
      assert.equal(response.headers.get('cache-control'), 'no-cache', file);
      assertSecured(response.headers, file);
      const etag = response.headers.get('etag')!;
      assert.equal((await fetch(`${t.url}/console/${file}`, { headers: { 'if-none-match': etag } })).status, 304, file);
    }
  });

  it('answers 404 with the same headers for anything but its files, dot segments and escapes included', async () => {
    for (const path of [
      '/console/nope.js',
      '/console/../package.json',
      '/console/..%2Fpackage.json',
      '/console/%2e%2e/%2e%2e/package.json',
      '/console/pages/..%2F..%2Froutes.ts',
      '/console/routes.ts',
      '/console/README.md',
      '/console/%E0%A4%A',
      '/console/pages%5C..%5Capp.js',
    ]) {
      const response = await rawGet(t, path);
      assert.equal(response.status, 404, path);
      assertSecured(response.headers, path);
      assert.equal(response.body, 'Not found', path);
    }
  });

  it('keeps no secret in what it serves', async () => {
    for (const file of ['', '/app.js', '/rpc.js', '/dom.js', '/pages/secrets.js']) {
      const text = await (await fetch(`${t.url}/console${file}`)).text();
      assert.doesNotMatch(text, /localStorage|sessionStorage|document\.cookie|innerHTML/, file);
    }
  });
});
