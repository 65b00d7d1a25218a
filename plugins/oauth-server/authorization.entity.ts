import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * An authorization request, from `/oauth/authorize` until its code is
 * exchanged: what the client asked, then what the user granted. Only hashes
 * of the request id (in the consent page's address) and of the code are kept.
 */
export const OAuthAuthorization = defineEntity({
  name: 'OAuthAuthorization',
  tableName: 'oauth_server_authorization',
  properties: (p) => ({
    requestHash: p.text().primary(),
    /** The issuer the request was made to (PUBLIC_URL, or the host the client used): the code's answer names it as `iss`. */
    issuer: p.text(),
    clientId: p.text(),
    clientName: p.text(),
    clientUri: p.text().nullable(),
    /** `metadata-document` or `registered`: how the client's identity was learnt. */
    clientKind: p.text(),
    redirectUri: p.text(),
    codeChallenge: p.text(),
    state: p.text().nullable(),
    /** The door (resource) asked for: `mcp` or `api`. */
    door: p.text(),
    /** Groups and operations asked for; null for everything the user's role allows. */
    scopes: p.json<string[]>().nullable(),
    readOnly: p.boolean(),
    expiresAt: p.datetime(),
    /**
     * Set when the user approves: the code's hash, who approved (their
     * subscription and user: this table is of no subscription until then,
     * so the columns are not the tenant's `subscription_id`), and what they granted.
     */
    codeHash: p.text().nullable().unique(),
    approverSubscriptionId: p.uuid().nullable(),
    approverUserId: p.uuid().nullable(),
    grantedScopes: p.json<string[]>().nullable(),
    grantedReadOnly: p.boolean().nullable(),
    /** The grant its code was exchanged for: a second exchange of the code revokes it (RFC 6749 section 4.1.2). */
    grantId: p.uuid().nullable(),
  }),
});
export type OAuthAuthorization = InferEntity<typeof OAuthAuthorization>;
