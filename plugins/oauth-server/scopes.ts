import type { OperationCaller } from 'rpc-service/plugin';
import { OAuthError } from './oauth-error.ts';

/** The scope that narrows a grant to operations that change nothing, as an API key's `readOnly` does. */
export const READ_ONLY = 'read-only';

/** What a client asks for or a user grants: API-key scopes (groups, operations; null for all the role allows) and the read-only flag. */
export interface Access {
  scopes: string[] | null;
  readOnly: boolean;
}

/** A scope as the consent page shows it. */
export interface ScopeView {
  scope: string;
  describe: string;
}

/**
 * OAuth scopes are the scopes API keys have (plugins/api-key/README.md): a
 * group (`MemoryRpc`), an operation (`MemoryRpc.saveMemory`), and `read-only`.
 * A request without `scope` asks for everything the user's role allows.
 */
export class ScopeVocabulary {
  readonly #operations: OperationCaller;
  #known?: { groups: Map<string, number>; operations: Map<string, string> };

  constructor(operations: OperationCaller) {
    this.#operations = operations;
  }

  /** Read on first use: operations are listed once every plugin is loaded. */
  get #vocabulary() {
    if (this.#known) return this.#known;
    const groups = new Map<string, number>();
    const operations = new Map<string, string>();
    for (const operation of this.#operations.listing()) {
      if (operation.access === 'public') continue;
      const group = operation.method.slice(0, operation.method.indexOf('.'));
      groups.set(group, (groups.get(group) ?? 0) + 1);
      operations.set(operation.method, operation.description);
    }
    return (this.#known = { groups, operations });
  }

  /**
   * What protected resource and server metadata list: the groups. Operations
   * and `read-only` are scopes too, but not listed: a client that names no
   * scope asks for what is listed (the MCP SDK does), and would then ask for
   * hundreds of operations, or only to read.
   */
  supported(): string[] {
    return [...this.#vocabulary.groups.keys()].sort();
  }

  /** Parses a `scope` parameter; `invalid_scope` for a name no loaded plugin has. */
  parse(scope: string | undefined): Access {
    const words = (scope ?? '').split(' ').filter((word) => word !== '');
    if (words.length > 200) throw new OAuthError('invalid_scope', 'At most 200 scopes may be asked for');
    const named = [...new Set(words.filter((word) => word !== READ_ONLY))];
    const unknown = named.filter((word) => !this.#vocabulary.groups.has(word) && !this.#vocabulary.operations.has(word));
    if (unknown.length > 0)
      throw new OAuthError('invalid_scope', `Unknown scope ${unknown.slice(0, 5).join(', ')}: scopes are groups, operations and read-only`);
    return { scopes: named.length === 0 ? null : named, readOnly: words.includes(READ_ONLY) };
  }

  /** The `scope` of a token answer. */
  format(access: Access): string {
    return [...(access.scopes ?? []), ...(access.readOnly ? [READ_ONLY] : [])].join(' ');
  }

  /** Each scope with what it allows, for the consent page. */
  describe(scopes: readonly string[]): ScopeView[] {
    return scopes.map((scope) => {
      const count = this.#vocabulary.groups.get(scope);
      const describe = count !== undefined ? `every operation of ${scope} (${count})` : (this.#vocabulary.operations.get(scope) ?? scope);
      return { scope, describe };
    });
  }
}

/** Whether `granted` gives nothing `asked` does not: each granted scope is asked for (or its group is), and read-only stays if asked. */
export function within(granted: Access, asked: Access): boolean {
  if (asked.readOnly && !granted.readOnly) return false;
  if (asked.scopes === null) return true;
  if (granted.scopes === null) return false;
  const groupOf = (scope: string) => scope.split('.')[0]!;
  return granted.scopes.every((scope) => asked.scopes!.includes(scope) || asked.scopes!.includes(groupOf(scope)));
}
