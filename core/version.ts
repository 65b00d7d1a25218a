import { readFileSync } from 'node:fs';

/**
 * The version of the plugin contract, which is the package's own version:
 * plugins declare the range they support in `coreVersion` and in their peer
 * dependency on rpc-service, and a breaking change to the SDK is a new major.
 */
export const CORE_VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
