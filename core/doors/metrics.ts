import ipaddr from 'ipaddr.js';
import { digestsEqual, sha256 } from '../credentials/crypto.ts';

/** Whether an Authorization header is `Bearer <token>`; compared as digests, so the time taken says nothing of how much of it matched. */
export function bearerMatches(authorization: string | undefined, token: string): boolean {
  const presented = /^Bearer +(\S+)$/i.exec(authorization ?? '')?.[1];
  return presented !== undefined && digestsEqual(sha256(presented), sha256(token));
}

/** Whether a listening address is reachable from other machines (anything but loopback: 0.0.0.0, ::, an interface's address). */
export function beyondLoopback(address: string): boolean {
  return !ipaddr.isValid(address) || ipaddr.process(address).range() !== 'loopback';
}
