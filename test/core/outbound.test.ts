import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { isPublicAddress, Outbound, OutboundRefusedError } from '../../core/base/outbound.ts';

/** A receiver on loopback: /ok answers, /to?url= redirects there, /count says how many requests reached it. */
async function receiver(): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    const url = new URL(req.url!, 'http://receiver');
    if (url.pathname === '/to') {
      res.writeHead(302, { location: url.searchParams.get('url')! }).end();
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`${req.method} ${url.pathname}`);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, hits: () => hits };
}

const refused = (promise: Promise<unknown>, pattern: RegExp) =>
  assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof OutboundRefusedError, String(error));
    assert.match(error.message, pattern);
    return true;
  });

describe('outbound requests made for tenants', () => {
  let target: Awaited<ReturnType<typeof receiver>>;
  before(async () => {
    target = await receiver();
  });
  after(() => new Promise((resolve) => target.server.close(resolve)));

  it('tells public addresses from loopback, private, link-local, CGNAT, metadata and their IPv6 forms', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e']) assert.ok(isPublicAddress(address), address);
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '64:ff9b::a9fe:a9fe',
      // IPv4-compatible (::/96), 6to4, NAT64 (both prefixes) and Teredo all carry an IPv4 address.
      '::7f00:1',
      '::a9fe:a9fe',
      '2002:7f00:1::',
      '64:ff9b::7f00:1',
      '64:ff9b:1::a00:1',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      // Documentation, benchmarking, discard-only, site-local, segment routing, broadcast, AS112, AMT.
      '2001:db8::1',
      '3fff::1',
      '2001:2::1',
      '100::1',
      'fec0::1',
      '5f00::1',
      '255.255.255.255',
      '192.175.48.1',
      '192.52.193.1',
      '198.18.0.1',
      'not an address',
    ]) {
      assert.equal(isPublicAddress(address), false, address);
    }
  });

  it('refuses loopback, IPv6 loopback, metadata, a name resolving to loopback and a redirect to one, before anything is sent', async () => {
    const outbound = new Outbound({ allowPrivate: false, allowedHosts: [] });
    try {
      const before = target.hits();
      await refused(outbound.fetch(`http://127.0.0.1:${target.port}/ok`), /127\.0\.0\.1 is not a public address/);
      await refused(outbound.fetch(`http://[::1]:${target.port}/ok`), /::1 is not a public address/);
      await refused(outbound.fetch('http://169.254.169.254/latest/meta-data/'), /169\.254\.169\.254/);
      await refused(outbound.fetch(`http://[::ffff:127.0.0.1]:${target.port}/ok`), /not a public address/);
      await refused(outbound.fetch(`http://localhost:${target.port}/ok`), /^localhost is not a public address$/);
      await refused(outbound.fetch('file:///etc/passwd'), /file: URLs are not requested/);
      assert.equal(target.hits(), before, 'nothing reached the receiver');
    } finally {
      await outbound.close();
    }
  });

  it('refuses IPv4 written inside IPv6 and in decimal, octal or hex, and never tells what a name resolves to', async () => {
    const outbound = new Outbound({ allowPrivate: false, allowedHosts: [] });
    try {
      const before = target.hits();
      for (const host of [
        '[::127.0.0.1]',
        '[::ffff:127.0.0.1]',
        '[2002:7f00:1::]',
        '[64:ff9b::7f00:1]',
        '[64:ff9b:1::a00:1]',
        '[2001:0:4136:e378:8000:63bf:3fff:fdd2]',
        '0.0.0.0',
        '2130706433',
        '0177.0.0.1',
        '0x7f.0.0.1',
        '0x7f000001',
        '127.1',
      ]) {
        await refused(outbound.fetch(`http://${host}:${target.port}/ok`), /is not a public address$/);
      }
      // localhost resolves to 127.0.0.1 (and ::1): the refusal names the host as written, not the address.
      await assert.rejects(outbound.fetch(`http://LocalHost:${target.port}/ok`), (error: Error) => {
        assert.ok(error instanceof OutboundRefusedError, String(error));
        assert.equal(error.message, 'localhost is not a public address');
        assert.doesNotMatch(error.message, /127\.0\.0\.1|::1/);
        return true;
      });
      assert.equal(target.hits(), before, 'nothing reached the receiver');
      // A public address still passes the check (nothing is sent).
      assert.equal(outbound.check('https://93.184.216.34/hook').hostname, '93.184.216.34');
      assert.equal(outbound.check('https://[2606:4700:4700::1111]/hook').hostname, '[2606:4700:4700::1111]');
    } finally {
      await outbound.close();
    }
  });

  it('checks every redirect: an allowed host that redirects to a private address is refused there', async () => {
    const outbound = new Outbound({ allowPrivate: false, allowedHosts: [`127.0.0.1:${target.port}`] });
    try {
      const ok = await outbound.fetch(`http://127.0.0.1:${target.port}/ok`);
      assert.equal(await ok.text(), 'GET /ok');
      await refused(outbound.fetch(`http://127.0.0.1:${target.port}/to?url=${encodeURIComponent('http://169.254.169.254/')}`), /169\.254\.169\.254/);
      // Allowed only on its port: the same address on another port is refused.
      await refused(outbound.fetch(`http://127.0.0.1:${target.port + 1}/ok`), /not a public address/);
    } finally {
      await outbound.close();
    }
  });

  it('with OUTBOUND_ALLOW_PRIVATE follows redirects (a POST continues as a GET), and returns a 3xx as it is when told not to follow', async () => {
    const outbound = new Outbound({ allowPrivate: true, allowedHosts: [] });
    try {
      const redirected = await outbound.fetch(`http://localhost:${target.port}/to?url=${encodeURIComponent(`http://127.0.0.1:${target.port}/landed`)}`, {
        method: 'POST',
        body: 'x',
      });
      assert.equal(await redirected.text(), 'GET /landed');
      const unfollowed = await outbound.fetch(`http://127.0.0.1:${target.port}/to?url=%2Fok`, { maxRedirects: 0 });
      assert.equal(unfollowed.status, 302);
    } finally {
      await outbound.close();
    }
  });
});
