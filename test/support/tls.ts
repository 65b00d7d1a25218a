import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCertificates {
  /** The certificate authority's PEM file: what the service is told to trust (OUTBOUND_CA_FILE). */
  caFile: string;
  /** The server's key and certificate, for `https.createServer`. */
  key: string;
  cert: string;
}

/**
 * A private certificate authority and a certificate it signed for `localhost`,
 * made with the openssl command line: a peer the service reaches over https
 * as it would a real one, trusting only what it is told to.
 */
export function makeCertificates(): TestCertificates {
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-tls-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out', file('ca.pem'), '-days', '2', '-subj', '/CN=Test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n');
  openssl(
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.pem'),
    '-days',
    '2',
    '-extfile',
    file('server.ext'),
  );
  return { caFile: file('ca.pem'), key: readFileSync(file('server.key'), 'utf8'), cert: readFileSync(file('server.pem'), 'utf8') };
}
