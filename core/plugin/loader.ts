import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import semver from 'semver';
import * as v from 'valibot';
import { CORE_SETTING_NAMES } from '../base/config.ts';
import { PACKAGE_ROOT, typeScriptReady } from '../base/paths.ts';
import { settingsEntries } from '../base/settings.ts';
import { JOB_MARKER } from '../jobs/job-service.ts';
import { CORE_ERROR_STATUS, errorStatus, registerErrorCodes } from '../base/errors.ts';
import { ACCESS_LEVELS, OPERATION_KINDS, OPERATION_MARKER } from '../rpc/operation.ts';
import { CORE_VERSION, SDK_RANGE } from '../base/version.ts';
import { isPlugin, type Plugin } from './define.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';
import type { ExtensionPoint } from '../base/extension-points.ts';
import { CORE_SERVICE_NAMES, SCOPE_NAMES } from './services.ts';

export { PluginLoadError };

export const PLUGIN_ID = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
export const GROUP = /^[A-Z][A-Za-z0-9]*Rpc$/;
const OPERATION_NAME = /^[a-z][A-Za-z0-9]*$/;
const JOB_NAME = OPERATION_NAME;
const CRON_FIELDS = 5;

/** The folder each plugin was loaded from, where known (its migrations live under it). */
export const pluginFolders = new WeakMap<Plugin, string>();

const remember = (plugins: Plugin[], folder: string): Plugin[] => {
  for (const plugin of plugins) pluginFolders.set(plugin, folder);
  return plugins;
};

/** The plugins of the service's own plugins folder: an author whose plugin clashes with one is told it is built in. */
const builtInPlugins = new WeakSet<Plugin>();

/** This package's manifest, as a plugin resolving `rpc-service/package.json` finds it when it shares the running SDK. */
const OWN_MANIFEST = realpathSync(path.join(PACKAGE_ROOT, 'package.json'));

/** Imports every plugin in `plugins/<name>/index.ts` of the given folder. */
export async function discoverLocalPlugins(folder: string): Promise<Plugin[]> {
  if (!existsSync(folder)) return [];
  const found: Plugin[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    if (!entry.isDirectory()) continue;
    const index = ['index.ts', 'index.js'].map((file) => path.join(folder, entry.name, file)).find(existsSync);
    if (!index) continue;
    await typeScriptReady(index);
    const plugins = remember(pluginsExportedBy(await import(pathToFileURL(index).href), `plugins/${entry.name}`), path.dirname(index));
    for (const plugin of plugins) builtInPlugins.add(plugin);
    found.push(...plugins);
  }
  return found;
}

/** Imports the third-party plugins named in PLUGINS: npm package names, or paths starting with . or /. */
export async function importPackagePlugins(specifiers: string[], cwd = process.cwd()): Promise<Plugin[]> {
  const found: Plugin[] = [];
  for (const specifier of specifiers) {
    const entry = /^[./]/.test(specifier) ? entryOfPath(path.resolve(cwd, specifier)) : undefined;
    const target = entry ? pathToFileURL(entry).href : specifier;
    const file = entry ?? resolvedFile(specifier);
    checkOneSdk(specifier, file);
    let module: Record<string, unknown>;
    try {
      await typeScriptReady(file);
      module = await import(target);
    } catch (error) {
      throw importError(specifier, entry === undefined, error as NodeJS.ErrnoException);
    }
    const plugins = pluginsExportedBy(module, specifier);
    if (plugins.length === 0) {
      throw new PluginLoadError('PLUGIN_NOT_EXPORTED', `"${specifier}" named in PLUGINS exports no plugin made with definePlugin()`);
    }
    found.push(...(entry ? remember(plugins, path.dirname(entry)) : plugins));
  }
  return found;
}

/** Where a package name resolves from the loader, as `import` would find it; undefined when it does not (the import says why). */
function resolvedFile(specifier: string): string | undefined {
  try {
    return fileURLToPath(import.meta.resolve(specifier));
  } catch {
    return undefined;
  }
}

/**
 * A plugin folder with an SDK of its own (its development install, which a
 * plugin named by path or installed from its folder keeps) would load a second
 * copy of the core beside the running one, whose entities and errors the
 * running core does not know: refused before it is imported.
 */
function checkOneSdk(specifier: string, file: string | undefined): void {
  if (!file) return;
  let manifest: string;
  try {
    manifest = realpathSync(createRequire(file).resolve('rpc-service/package.json'));
  } catch {
    return;
  }
  if (manifest === OWN_MANIFEST) return;
  throw new PluginLoadError(
    'PLUGIN_SDK_COPY',
    `Plugin package "${specifier}" named in PLUGINS resolves rpc-service from ${path.dirname(manifest)}, not the running service's ` +
      `${path.dirname(OWN_MANIFEST)}: two copies of the SDK cannot share a process. ${INSTALL_ADVICE}`,
  );
}

/** How a plugin gets the running service's SDK: installed as a package beside it. */
const INSTALL_ADVICE =
  'Install the plugin from its package into the installation folder that has rpc-service (npm pack in the plugin folder, then npm install <tarball> ' +
  `there; not from its folder, which npm links), and declare the service in the plugin's package.json: "peerDependencies": {"rpc-service": "${SDK_RANGE}"}`;

/**
 * Why a plugin named in PLUGINS did not import, and what to do: the two
 * usual causes are a package not installed and a plugin that cannot resolve
 * the SDK (the service is not a package in the plugin's node_modules).
 */
function importError(specifier: string, bare: boolean, error: NodeJS.ErrnoException): PluginLoadError {
  const prefix = `Cannot import plugin package "${specifier}" named in PLUGINS`;
  const missing = error.code === 'ERR_MODULE_NOT_FOUND' ? /^Cannot find package '([^']+)' imported from (.+)$/.exec(error.message) : null;
  if (missing?.[1] === 'rpc-service') {
    return new PluginLoadError(
      'PLUGIN_SDK_UNRESOLVED',
      `${prefix}: ${missing[2]} imports the SDK, rpc-service, which does not resolve from there. ${INSTALL_ADVICE}`,
    );
  }
  const name = specifier.split('/', specifier.startsWith('@') ? 2 : 1).join('/');
  if (bare && missing?.[1] === name) {
    return new PluginLoadError('PLUGIN_IMPORT_FAILED', `${prefix}: it is not installed; install it beside the service: npm install ${name}`);
  }
  return new PluginLoadError('PLUGIN_IMPORT_FAILED', `${prefix}: ${error.message}`);
}

/** A plugin given by path may be a file or a package folder (its package.json "main", else index.ts/js). */
function entryOfPath(target: string): string {
  if (!existsSync(target) || !statSync(target).isDirectory()) return target;
  const manifest = path.join(target, 'package.json');
  const main = existsSync(manifest) ? (JSON.parse(readFileSync(manifest, 'utf8')) as { main?: string }).main : undefined;
  return (
    [main, 'index.ts', 'index.js']
      .filter(Boolean)
      .map((file) => path.join(target, file!))
      .find(existsSync) ?? target
  );
}

function pluginsExportedBy(module: Record<string, unknown>, source: string): Plugin[] {
  const plugins = new Set(Object.values(module).filter(isPlugin));
  const candidate = module.default;
  if (plugins.size === 0 && typeof candidate === 'object' && candidate !== null && 'operations' in candidate) {
    throw new PluginLoadError('PLUGIN_NOT_WRAPPED', `${source} exports a plain object, not a plugin: wrap it in definePlugin()`);
  }
  return [...plugins];
}

/** `task-board` owns the table `task_board` and every table starting with `task_board_`. */
const tableBaseOf = (pluginId: string) => pluginId.replace(/-/g, '_');
const ownsTable = (pluginId: string, table: string) => table === tableBaseOf(pluginId) || table.startsWith(`${tableBaseOf(pluginId)}_`);

const SETTING_NAME = /^[A-Z][A-Z0-9_]*$/;
const ERROR_CODE = /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/;

/**
 * Checks every plugin against the contract and returns them in load order:
 * a plugin comes after those it names in `dependsOn`, whose services it uses
 * and whose extension points it contributes to. Each failure is a coded
 * PluginLoadError naming the plugin and what to fix. Once all pass, their
 * error codes are registered, so RpcError answers each with its status.
 */
export function validatePlugins(plugins: readonly Plugin[], corePoints: readonly ExtensionPoint[] = []): Plugin[] {
  const byId = new Map<string, Plugin>();
  const groups = new Map<string, Plugin>();
  const services = new Map<string, string>(CORE_SERVICE_NAMES.map((name) => [name, 'the core']));
  for (const name of SCOPE_NAMES) services.set(name, 'the core (every plugin gets its own)');
  const settings = new Map<string, string>(CORE_SETTING_NAMES.map((name) => [name, 'the core']));
  const errorCodes = new Map<string, string>(Object.keys(CORE_ERROR_STATUS).map((code) => [code, 'the core']));
  const points = new Map<string, { owner: string; point: ExtensionPoint }>(corePoints.map((point) => [point.id, { owner: 'core', point }]));

  for (const plugin of plugins) {
    const label = `Plugin "${plugin.id}"`;
    if (typeof plugin.id !== 'string' || !PLUGIN_ID.test(plugin.id)) {
      throw new PluginLoadError('PLUGIN_INVALID_ID', `Plugin id "${String(plugin.id)}" must be kebab-case (e.g. "task-board")`);
    }
    const same = byId.get(plugin.id);
    if (same && builtInPlugins.has(same)) {
      throw new PluginLoadError('PLUGIN_DUPLICATE_ID', `${label}: the id "${plugin.id}" is taken by the built-in plugin "${same.id}"; pick another id`);
    }
    if (same) throw new PluginLoadError('PLUGIN_DUPLICATE_ID', `${label} is loaded twice; plugin ids must be unique`);
    if (typeof plugin.group !== 'string' || !GROUP.test(plugin.group)) {
      throw new PluginLoadError('PLUGIN_INVALID_GROUP', `${label}: group "${String(plugin.group)}" must look like "TaskRpc"`);
    }
    const owner = groups.get(plugin.group);
    if (owner && builtInPlugins.has(owner)) {
      throw new PluginLoadError('PLUGIN_DUPLICATE_GROUP', `${label}: group ${plugin.group} is taken by the built-in plugin "${owner.id}"; pick another group`);
    }
    if (owner) throw new PluginLoadError('PLUGIN_DUPLICATE_GROUP', `${label}: group ${plugin.group} already belongs to plugin "${owner.id}"`);
    checkCoreVersion(plugin);
    checkOperations(plugin);
    for (const name of Object.keys(plugin.services ?? {})) {
      const taken = services.get(name);
      if (taken) throw new PluginLoadError('PLUGIN_DUPLICATE_SERVICE', `${label}: service "${name}" is already registered by ${taken}`);
      services.set(name, `plugin "${plugin.id}"`);
    }
    for (const name of plugin.exports ?? []) {
      if (!(name in (plugin.services ?? {}))) {
        throw new PluginLoadError('PLUGIN_INVALID_EXPORT', `${label} exports "${name}", which is not one of its services`);
      }
    }
    checkConfig(plugin, settings);
    checkErrorCodes(plugin, errorCodes);
    checkMigrations(plugin);
    checkJobs(plugin);
    for (const point of plugin.extensionPoints ?? []) {
      if (typeof point?.id !== 'string' || !point.id.startsWith(`${plugin.id}.`) || !v.isOfKind('schema', point.contribution)) {
        throw new PluginLoadError(
          'PLUGIN_INVALID_EXTENSION_POINT',
          `${label}: extension point "${String(point?.id)}" must be made with defineExtensionPoint, with an id starting with "${plugin.id}."`,
        );
      }
      if (points.has(point.id)) throw new PluginLoadError('PLUGIN_INVALID_EXTENSION_POINT', `${label}: extension point "${point.id}" is declared twice`);
      points.set(point.id, { owner: plugin.id, point });
    }
    byId.set(plugin.id, plugin);
    groups.set(plugin.group, plugin);
  }

  const exporters = new Map<string, string>();
  for (const plugin of byId.values()) for (const name of plugin.exports ?? []) exporters.set(name, plugin.id);
  const after = new Map<string, string[]>();
  for (const plugin of byId.values()) {
    const needs = [...(plugin.dependsOn ?? [])];
    for (const name of plugin.deps ?? []) {
      if ((CORE_SERVICE_NAMES as readonly string[]).includes(name)) continue;
      const provider = exporters.get(name);
      if (!provider || provider === plugin.id) {
        throw new PluginLoadError(
          'PLUGIN_UNKNOWN_SERVICE',
          `Plugin "${plugin.id}" uses service "${name}", which neither the core nor another loaded plugin exports`,
        );
      }
      needs.push(provider);
    }
    for (const [id, contributions] of Object.entries(plugin.extends ?? {})) {
      const declared = points.get(id);
      if (!declared) {
        throw new PluginLoadError(
          'PLUGIN_UNKNOWN_EXTENSION_POINT',
          `Plugin "${plugin.id}" contributes to extension point "${id}", which no loaded plugin declares`,
        );
      }
      // A function of the plugin's deps is checked on what it returns, once those deps exist (core/app/app.ts).
      if (typeof contributions !== 'function') checkContributions(plugin, declared.point, contributions);
      if (declared.owner !== 'core') needs.push(declared.owner);
    }
    after.set(plugin.id, needs);
  }
  checkTablePrefixes([...byId.values()]);
  const ordered = orderByDependencies(byId, after);
  for (const plugin of ordered) registerErrorCodes(plugin.errors ?? {});
  return ordered;
}

/** The plugins asked for and every plugin they need, in the order given: a backend with only the plugins under test. */
export function selectPlugins(plugins: readonly Plugin[], ids: readonly string[]): Plugin[] {
  const byId = new Map(plugins.map((plugin) => [plugin.id, plugin]));
  const exporters = new Map(plugins.flatMap((plugin) => (plugin.exports ?? []).map((name) => [name, plugin.id] as const)));
  const declarers = new Map(plugins.flatMap((plugin) => (plugin.extensionPoints ?? []).map((point) => [point.id, plugin.id] as const)));
  const chosen = new Set<string>();
  const visit = (id: string) => {
    const plugin = byId.get(id);
    if (!plugin || chosen.has(id)) return;
    chosen.add(id);
    for (const needed of plugin.dependsOn ?? []) visit(needed);
    for (const name of plugin.deps ?? []) visit(exporters.get(name) ?? '');
    for (const point of Object.keys(plugin.extends ?? {})) visit(declarers.get(point) ?? '');
  };
  for (const id of ids) {
    if (!byId.has(id)) throw new PluginLoadError('PLUGIN_MISSING_DEPENDENCY', `No plugin "${id}" to start`);
    visit(id);
  }
  return plugins.filter((plugin) => chosen.has(plugin.id));
}

/** Each contribution of a plugin to a point passes the point's `contribution` schema. */
export function checkContributions(plugin: Plugin, point: ExtensionPoint, contributions: unknown): void {
  const label = `Plugin "${plugin.id}": contribution to "${point.id}"`;
  if (!Array.isArray(contributions)) throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `${label} must be an array`);
  contributions.forEach((contribution, index) => {
    const result = v.safeParse(point.contribution, contribution);
    if (!result.success) {
      const problems = result.issues.map((issue) => `${v.getDotPath(issue) ?? '(value)'}: ${issue.message}`).join('; ');
      throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `${label} #${index + 1} is invalid: ${problems}`);
    }
  });
}

function checkCoreVersion(plugin: Plugin): void {
  const label = `Plugin "${plugin.id}"`;
  const fix = `a range containing ${CORE_VERSION}, e.g. "${SDK_RANGE}" (and its peer dependency on rpc-service to the same)`;
  if (!semver.validRange(plugin.coreVersion)) {
    throw new PluginLoadError('PLUGIN_CORE_VERSION', `${label}: coreVersion "${String(plugin.coreVersion)}" is not a valid semver range; set it to ${fix}`);
  }
  if (!semver.satisfies(CORE_VERSION, plugin.coreVersion)) {
    throw new PluginLoadError(
      'PLUGIN_CORE_VERSION',
      `${label} needs core version "${plugin.coreVersion}", but this core is ${CORE_VERSION}: ` +
        `update the service to a version in "${plugin.coreVersion}", or change the plugin's coreVersion to ${fix}`,
    );
  }
}

function checkConfig(plugin: Plugin, settings: Map<string, string>): void {
  if (plugin.config === undefined) return;
  const label = `Plugin "${plugin.id}"`;
  const entries = settingsEntries(plugin.config);
  if (!entries) {
    throw new PluginLoadError('PLUGIN_INVALID_CONFIG_SCHEMA', `${label}: config must be a valibot object schema of its environment variables`);
  }
  for (const name of Object.keys(entries)) {
    if (!SETTING_NAME.test(name)) {
      throw new PluginLoadError('PLUGIN_INVALID_CONFIG_SCHEMA', `${label}: setting "${name}" must be an upper-case environment variable name`);
    }
    const owner = settings.get(name);
    if (owner) throw new PluginLoadError('PLUGIN_DUPLICATE_SETTING', `${label}: setting ${name} already belongs to ${owner}`);
    settings.set(name, `plugin "${plugin.id}"`);
  }
}

function checkErrorCodes(plugin: Plugin, codes: Map<string, string>): void {
  const label = `Plugin "${plugin.id}"`;
  for (const [code, status] of Object.entries(plugin.errors ?? {})) {
    if (!ERROR_CODE.test(code) || !Number.isInteger(status) || status < 400 || status > 599) {
      throw new PluginLoadError('PLUGIN_INVALID_ERROR_CODE', `${label}: error code "${code}" must be UPPER_SNAKE_CASE, with an HTTP status from 400 to 599`);
    }
    const owner = codes.get(code);
    if (owner) throw new PluginLoadError('PLUGIN_DUPLICATE_ERROR_CODE', `${label}: error code ${code} already belongs to ${owner}`);
    const registered = errorStatus(code);
    if (registered !== undefined && registered !== status) {
      throw new PluginLoadError('PLUGIN_DUPLICATE_ERROR_CODE', `${label}: error code ${code} was registered in this process with HTTP status ${registered}`);
    }
    codes.set(code, `plugin "${plugin.id}"`);
  }
}

function checkMigrations(plugin: Plugin): void {
  const names = new Set<string>();
  for (const migration of plugin.migrations ?? []) {
    if (typeof migration !== 'function' || !migration.name || names.has(migration.name)) {
      throw new PluginLoadError('PLUGIN_INVALID_MIGRATION', `Plugin "${plugin.id}": migrations must be distinct classes written by npm run migration:create`);
    }
    // Duck-typed rather than instanceof: a plugin package may carry its own copy of the SDK.
    if (typeof (migration.prototype as { statementsUp?: unknown }).statementsUp !== 'function') {
      throw new PluginLoadError(
        'PLUGIN_INVALID_MIGRATION',
        `Plugin "${plugin.id}": migration ${migration.name} must extend Migration from rpc-service/plugin (import { Migration } from 'rpc-service/plugin'), not MikroORM's`,
      );
    }
    names.add(migration.name);
  }
}

function checkJobs(plugin: Plugin): void {
  for (const [name, job] of Object.entries(plugin.jobs ?? {})) {
    const label = `Plugin "${plugin.id}": job "${name}"`;
    if (!JOB_NAME.test(name)) throw new PluginLoadError('PLUGIN_INVALID_JOB', `${label}: a job name must be camelCase`);
    if (!job || (job as unknown as Record<symbol, unknown>)[JOB_MARKER] !== true || !v.isOfKind('schema', job.data) || typeof job.handler !== 'function') {
      throw new PluginLoadError('PLUGIN_INVALID_JOB', `${label} must be made with defineJob(), with a valibot data schema and a handler`);
    }
    if (job.schedule !== undefined && (typeof job.schedule !== 'string' || job.schedule.trim().split(/\s+/).length !== CRON_FIELDS)) {
      throw new PluginLoadError('PLUGIN_INVALID_JOB', `${label}: schedule "${String(job.schedule)}" must be a five-field cron expression (UTC)`);
    }
  }
}

/** Each table is the plugin's own (see tableBaseOf), and not one of another plugin with a longer id (`task_` vs `task_board_`). */
function checkTablePrefixes(plugins: Plugin[]): void {
  for (const plugin of plugins) {
    const base = tableBaseOf(plugin.id);
    for (const entity of plugin.entities ?? []) {
      const label = `Plugin "${plugin.id}": entity ${entity.meta.className}`;
      const table = entity.meta.tableName ?? entity.meta.collection;
      if (!table || !ownsTable(plugin.id, table)) {
        throw new PluginLoadError(
          'PLUGIN_TABLE_PREFIX',
          `${label}: table "${table ?? ''}" must be "${base}" or start with "${base}_" ` +
            `(a plugin's tables are named after its id "${plugin.id}", with - turned into _); rename the table`,
        );
      }
      const other = plugins.find((candidate) => candidate.id.length > plugin.id.length && ownsTable(candidate.id, table));
      if (other) {
        throw new PluginLoadError('PLUGIN_TABLE_PREFIX', `${label}: table "${table}" looks like a table of plugin "${other.id}"`);
      }
    }
  }
}

function checkOperations(plugin: Plugin): void {
  const label = `Plugin "${plugin.id}" (group ${plugin.group})`;
  if (typeof plugin.operations !== 'object' || plugin.operations === null) {
    throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label} has no operations object`);
  }
  for (const [key, operation] of Object.entries(plugin.operations)) {
    const dot = key.indexOf('.');
    if (dot !== -1 && key.slice(0, dot) !== plugin.group) {
      throw new PluginLoadError(
        'PLUGIN_OPERATION_OUTSIDE_GROUP',
        `${label} declares operation "${key}" outside its own group; a plugin may only register ${plugin.group}.* operations`,
      );
    }
    const name = dot === -1 ? key : key.slice(dot + 1);
    if (!OPERATION_NAME.test(name)) throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation name "${key}" must be camelCase`);
    if (!operation || (operation as unknown as Record<symbol, unknown>)[OPERATION_MARKER] !== true) {
      throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation "${name}" must be made with defineOperation()`);
    }
    if (!ACCESS_LEVELS.includes(operation.access)) {
      throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation "${name}" has unknown access "${String(operation.access)}"`);
    }
    if (operation.access === 'public' && plugin.group !== 'AuthRpc' && plugin.signIn !== true) {
      throw new PluginLoadError(
        'PLUGIN_PUBLIC_OPERATION',
        `${label}: operation "${name}" cannot be public; only AuthRpc's and those of a plugin that signs people in (signIn: true) are`,
      );
    }
    if (!v.isOfKind('schema', operation.params) || typeof operation.handler !== 'function') {
      throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation "${name}" needs a valibot params schema and a handler`);
    }
    if (operation.result !== undefined && !v.isOfKind('schema', operation.result)) {
      throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation "${name}" declares a result that is not a valibot schema`);
    }
    if (operation.kind !== undefined && !OPERATION_KINDS.includes(operation.kind)) {
      throw new PluginLoadError('PLUGIN_INVALID_OPERATION', `${label}: operation "${name}" has kind "${String(operation.kind)}"; it is "read" or "write"`);
    }
  }
}

function orderByDependencies(byId: Map<string, Plugin>, after: Map<string, string[]>): Plugin[] {
  const ordered: Plugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (plugin: Plugin, chain: string[]) => {
    if (state.get(plugin.id) === 'done') return;
    if (state.get(plugin.id) === 'visiting') {
      throw new PluginLoadError('PLUGIN_DEPENDENCY_CYCLE', `Plugins depend on each other in a cycle: ${[...chain, plugin.id].join(' → ')}`);
    }
    state.set(plugin.id, 'visiting');
    for (const dependency of after.get(plugin.id) ?? []) {
      const needed = byId.get(dependency);
      if (!needed) {
        throw new PluginLoadError('PLUGIN_MISSING_DEPENDENCY', `Plugin "${plugin.id}" depends on "${dependency}", which is not loaded`);
      }
      visit(needed, [...chain, plugin.id]);
    }
    state.set(plugin.id, 'done');
    ordered.push(plugin);
  };
  for (const plugin of byId.values()) visit(plugin, []);
  return ordered;
}
