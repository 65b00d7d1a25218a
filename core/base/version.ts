import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './paths.ts';

/**
 * The version of the plugin contract, which is the package's own version:
 * plugins declare the range they support in `coreVersion` and in their peer
 * dependency on rpc-service, and a breaking change to the SDK is a new major.
 */
export const CORE_VERSION: string = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')).version;

/** The range a plugin written against this SDK declares, in `coreVersion` and its peer dependency: `^<major>.0.0`. */
export const SDK_RANGE = `^${CORE_VERSION.split('.')[0]}.0.0`;
