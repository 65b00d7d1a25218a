import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import semver from 'semver';
import * as v from 'valibot';
import { ACCESS_LEVELS, OPERATION_MARKER } from '../rpc/operation.ts';
import { CORE_VERSION } from '../version.ts';
import { isPlugin, type Plugin } from './define.ts';

export class PluginLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PluginLoadError';
  }
}

const PLUGIN_ID = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
const GROUP = /^[A-Z][A-Za-z0-9]*Rpc$/;
const OPERATION_NAME = /^[a-z][A-Za-z0-9]*$/;

/** Imports every plugin in `plugins/<name>/index.ts` of the given folder. */
export async function discoverLocalPlugins(folder: string): Promise<Plugin[]> {
  if (!existsSync(folder)) return [];
  const found: Plugin[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    if (!entry.isDirectory()) continue;
    const index = ['index.ts', 'index.js'].map((file) => path.join(folder, entry.name, file)).find(existsSync);
    if (!index) continue;
    found.push(...pluginsExportedBy(await import(pathToFileURL(index).href), `plugins/${entry.name}`));
  }
  return found;
}

/** Imports the third-party plugins named in PLUGINS: npm package names, or paths starting with . or /. */
export async function importPackagePlugins(specifiers: string[], cwd = process.cwd()): Promise<Plugin[]> {
  const found: Plugin[] = [];
  for (const specifier of specifiers) {
    const target = /^[./]/.test(specifier) ? pathToFileURL(entryOfPath(path.resolve(cwd, specifier))).href : specifier;
    let module: Record<string, unknown>;
    try {
      module = await import(target);
    } catch (error) {
      throw new PluginLoadError(`Cannot import plugin package "${specifier}" named in PLUGINS: ${(error as Error).message}`);
    }
    const plugins = pluginsExportedBy(module, specifier);
    if (plugins.length === 0) {
      throw new PluginLoadError(`"${specifier}" named in PLUGINS exports no plugin made with definePlugin()`);
    }
    found.push(...plugins);
  }
  return found;
}

/** A plugin given by path may be a file or a package folder (its package.json "main", else index.ts/js). */
function entryOfPath(target: string): string {
  if (!existsSync(target) || !statSync(target).isDirectory()) return target;
  const manifest = path.join(target, 'package.json');
  const main = existsSync(manifest) ? (JSON.parse(readFileSync(manifest, 'utf8')) as { main?: string }).main : undefined;
  return [main, 'index.ts', 'index.js'].filter(Boolean).map((file) => path.join(target, file!)).find(existsSync) ?? target;
}

function pluginsExportedBy(module: Record<string, unknown>, source: string): Plugin[] {
  const plugins = new Set(Object.values(module).filter(isPlugin));
  const candidate = module.default;
  if (plugins.size === 0 && typeof candidate === 'object' && candidate !== null && 'operations' in candidate) {
    throw new PluginLoadError(`${source} exports a plain object, not a plugin: wrap it in definePlugin()`);
  }
  return [...plugins];
}

const tablePrefixOf = (pluginId: string) => `${pluginId.replace(/-/g, '_')}_`;

/**
 * Checks every plugin against the contract and returns them in load order
 * (dependencies first). Each failure names the plugin and what to fix.
 */
export function validatePlugins(plugins: Plugin[]): Plugin[] {
  const byId = new Map<string, Plugin>();
  const groups = new Map<string, string>();
  const services = new Map<string, string>();

  for (const plugin of plugins) {
    const label = `Plugin "${plugin.id}"`;
    if (typeof plugin.id !== 'string' || !PLUGIN_ID.test(plugin.id)) {
      throw new PluginLoadError(`Plugin id "${String(plugin.id)}" must be kebab-case (e.g. "task-board")`);
    }
    if (byId.has(plugin.id)) throw new PluginLoadError(`${label} is loaded twice; plugin ids must be unique`);
    if (typeof plugin.group !== 'string' || !GROUP.test(plugin.group)) {
      throw new PluginLoadError(`${label}: group "${String(plugin.group)}" must look like "TaskRpc"`);
    }
    const owner = groups.get(plugin.group);
    if (owner) throw new PluginLoadError(`${label}: group ${plugin.group} already belongs to plugin "${owner}"`);
    if (!semver.validRange(plugin.coreVersion) || !semver.satisfies(CORE_VERSION, plugin.coreVersion)) {
      throw new PluginLoadError(
        `${label} needs core version "${plugin.coreVersion}", but this core is ${CORE_VERSION}`,
      );
    }
    checkOperations(plugin);
    for (const name of Object.keys(plugin.services ?? {})) {
      const taken = services.get(name);
      if (taken) throw new PluginLoadError(`${label}: service "${name}" is already registered by ${taken}`);
      services.set(name, `plugin "${plugin.id}"`);
    }
    byId.set(plugin.id, plugin);
    groups.set(plugin.group, plugin.id);
  }
  checkTablePrefixes([...byId.values()]);
  return orderByDependencies(byId);
}

/** Each table starts with its plugin's prefix, and not with the longer prefix of another plugin (`task_` vs `task_board_`). */
function checkTablePrefixes(plugins: Plugin[]): void {
  const prefixes = plugins.map((plugin) => ({ id: plugin.id, prefix: tablePrefixOf(plugin.id) }));
  for (const plugin of plugins) {
    const prefix = tablePrefixOf(plugin.id);
    for (const entity of plugin.entities ?? []) {
      const label = `Plugin "${plugin.id}": entity ${entity.meta.className}`;
      const table = entity.meta.tableName ?? entity.meta.collection;
      if (!table) throw new PluginLoadError(`${label} must set a tableName starting with "${prefix}"`);
      if (!table.startsWith(prefix)) throw new PluginLoadError(`${label}: table "${table}" must start with "${prefix}"`);
      const other = prefixes.find((candidate) => candidate.prefix.length > prefix.length && table.startsWith(candidate.prefix));
      if (other) {
        throw new PluginLoadError(`${label}: table "${table}" looks like a table of plugin "${other.id}" (prefix "${other.prefix}")`);
      }
    }
  }
}

function checkOperations(plugin: Plugin): void {
  const label = `Plugin "${plugin.id}" (group ${plugin.group})`;
  if (typeof plugin.operations !== 'object' || plugin.operations === null) {
    throw new PluginLoadError(`${label} has no operations object`);
  }
  for (const [key, operation] of Object.entries(plugin.operations)) {
    const dot = key.indexOf('.');
    if (dot !== -1 && key.slice(0, dot) !== plugin.group) {
      throw new PluginLoadError(
        `${label} declares operation "${key}" outside its own group; a plugin may only register ${plugin.group}.* operations`,
      );
    }
    const name = dot === -1 ? key : key.slice(dot + 1);
    if (!OPERATION_NAME.test(name)) throw new PluginLoadError(`${label}: operation name "${key}" must be camelCase`);
    if (!operation || (operation as unknown as Record<symbol, unknown>)[OPERATION_MARKER] !== true) {
      throw new PluginLoadError(`${label}: operation "${name}" must be made with defineOperation()`);
    }
    if (!ACCESS_LEVELS.includes(operation.access)) {
      throw new PluginLoadError(`${label}: operation "${name}" has unknown access "${String(operation.access)}"`);
    }
    if (operation.access === 'public' && plugin.group !== 'AuthRpc') {
      throw new PluginLoadError(`${label}: operation "${name}" cannot be public; only AuthRpc operations are`);
    }
    if (!v.isOfKind('schema', operation.params) || typeof operation.handler !== 'function') {
      throw new PluginLoadError(`${label}: operation "${name}" needs a valibot params schema and a handler`);
    }
  }
}

function orderByDependencies(byId: Map<string, Plugin>): Plugin[] {
  const ordered: Plugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (plugin: Plugin, chain: string[]) => {
    if (state.get(plugin.id) === 'done') return;
    if (state.get(plugin.id) === 'visiting') {
      throw new PluginLoadError(`Plugins depend on each other in a cycle: ${[...chain, plugin.id].join(' → ')}`);
    }
    state.set(plugin.id, 'visiting');
    for (const dependency of plugin.dependsOn ?? []) {
      const needed = byId.get(dependency);
      if (!needed) throw new PluginLoadError(`Plugin "${plugin.id}" depends on "${dependency}", which is not loaded`);
      visit(needed, [...chain, plugin.id]);
    }
    state.set(plugin.id, 'done');
    ordered.push(plugin);
  };
  for (const plugin of byId.values()) visit(plugin, []);
  return ordered;
}
