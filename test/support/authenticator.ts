import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';

/** The code an authenticator app shows for a base32 secret, `steps` periods of 30 s from now (the test is the app). */
export const totpCode = (secret: string, steps = 0): string =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: Date.now() + steps * 30_000 });

/** What `navigator.credentials.create()` answers, as JSON. */
export interface RegistrationJson {
  id: string;
  rawId: string;
  type: 'public-key';
  response: { clientDataJSON: string; attestationObject: string };
  clientExtensionResults: Record<string, unknown>;
  authenticatorAttachment: string;
}

/** What `navigator.credentials.get()` answers, as JSON. */
export interface AssertionJson {
  id: string;
  rawId: string;
  type: 'public-key';
  response: { clientDataJSON: string; authenticatorData: string; signature: string; userHandle: string };
  clientExtensionResults: Record<string, unknown>;
  authenticatorAttachment: string;
}

/**
 * A passkey authenticator in the test process (WebAuthn Level 3, attestation
 * `none`, ES256): what a browser's platform authenticator answers to
 * `navigator.credentials.create()` and `.get()`, as `PublicKeyCredential.toJSON()`
 * gives it. For API-level tests of passkeys on both databases; the console's
 * own test drives Chromium's virtual authenticator (test/e2e/security.test.ts).
 */
export class SoftAuthenticator {
  readonly #credentials = new Map<string, { key: KeyObject; rpId: string; userHandle: string; counter: number }>();

  constructor(
    /** The origin the "browser" is at: the relying party's. */
    readonly origin: string,
  ) {}

  /** Answers registration options (`beginPasskeyRegistration`'s `options`) with a new discoverable credential. */
  create(options: Record<string, unknown>): RegistrationJson {
    const rp = options.rp as { id: string };
    const user = options.user as { id: string };
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const id = randomBytes(16);
    const jwk = publicKey.export({ format: 'jwk' });
    const cose = cbor(
      new Map<number, unknown>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x!, 'base64url')],
        [-3, Buffer.from(jwk.y!, 'base64url')],
      ]),
    );
    const attested = Buffer.concat([Buffer.alloc(16), u16(id.length), id, cose]);
    // User present, user verified, attested credential data.
    const authData = Buffer.concat([sha256(rp.id), Buffer.from([0x45]), u32(0), attested]);
    const attestationObject = cbor(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]),
    );
    this.#credentials.set(id.toString('base64url'), { key: privateKey, rpId: rp.id, userHandle: user.id, counter: 0 });
    return {
      id: id.toString('base64url'),
      rawId: id.toString('base64url'),
      type: 'public-key',
      response: {
        clientDataJSON: this.#clientData('webauthn.create', options.challenge as string),
        attestationObject: attestationObject.toString('base64url'),
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }

  /**
   * Answers authentication options (`beginPasskeySignIn`'s) with one of its
   * credentials: one the options allow, else (a sign-in without a username)
   * the one named, or the first for the relying party.
   */
  get(options: Record<string, unknown>, credentialId?: string): AssertionJson {
    const allowed = (options.allowCredentials as { id: string }[] | undefined)?.map(({ id }) => id);
    const id =
      credentialId ?? [...this.#credentials.keys()].find((each) => (allowed ? allowed.includes(each) : this.#credentials.get(each)!.rpId === options.rpId));
    const credential = id === undefined ? undefined : this.#credentials.get(id);
    if (!id || !credential) throw new Error('The authenticator holds no credential these options allow');
    credential.counter += 1;
    const authenticatorData = Buffer.concat([sha256(credential.rpId), Buffer.from([0x05]), u32(credential.counter)]);
    const clientDataJSON = this.#clientData('webauthn.get', options.challenge as string);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(Buffer.from(clientDataJSON, 'base64url'))]), credential.key);
    return {
      id,
      rawId: id,
      type: 'public-key',
      response: {
        clientDataJSON,
        authenticatorData: authenticatorData.toString('base64url'),
        signature: signature.toString('base64url'),
        userHandle: credential.userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }

  /** The ids of the credentials it made, oldest first. */
  get credentialIds(): string[] {
    return [...this.#credentials.keys()];
  }

  #clientData(type: string, challenge: string): string {
    return Buffer.from(JSON.stringify({ type, challenge, origin: this.origin, crossOrigin: false })).toString('base64url');
  }
}

const sha256 = (data: string | Buffer): Buffer => createHash('sha256').update(data).digest();
const u16 = (n: number): Buffer => Buffer.from([n >> 8, n & 0xff]);
const u32 = (n: number): Buffer => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(n);
  return out;
};

/** The CBOR (RFC 8949) of the few kinds an attestation holds: small integers, text, bytes and maps. */
function cbor(value: unknown): Buffer {
  const head = (major: number, length: number): Buffer =>
    length < 24
      ? Buffer.from([(major << 5) | length])
      : length < 256
        ? Buffer.from([(major << 5) | 24, length])
        : Buffer.from([(major << 5) | 25, length >> 8, length & 0xff]);
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)]);
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  if (value instanceof Map) return Buffer.concat([head(5, value.size), ...[...value].flatMap(([key, item]) => [cbor(key), cbor(item)])]);
  throw new Error(`No CBOR for ${typeof value}`);
}
