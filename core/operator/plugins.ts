import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isPlugin, type Plugin } from '../plugin/define.ts';
import { pluginFolders } from '../plugin/loader.ts';
import { typeScriptReady } from '../base/paths.ts';

/**
 * The plugins an installation loads, as a backup's manifest records them:
 * each with the version of the package it comes from, which for a built-in
 * plugin is the service's own. None for a plugin with no package (given as
 * an object, or a file outside any package).
 */
export interface PluginVersion {
  id: string;
  version?: string;
}

/** The version of the nearest package.json above `folder` that names a package (a `{"type": "module"}` one inside a package names none). */
function packageVersion(folder: string): string | undefined {
  for (let here = folder; ; here = path.dirname(here)) {
    const manifest = path.join(here, 'package.json');
    if (existsSync(manifest)) {
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string; version?: string };
      if (name) return version;
    }
    if (path.dirname(here) === here) return undefined;
  }
}

/**
 * Each plugin's id and version. The loader records the folder of built-in
 * plugins and of those PLUGINS names by path; one named by package name is
 * found by importing that package again (the module cache answers, with the
 * same plugin objects) and resolving where it lives.
 */
export async function pluginVersions(plugins: readonly Plugin[], specifiers: readonly string[]): Promise<PluginVersion[]> {
  const packageFolders = new Map<Plugin, string>();
  for (const specifier of specifiers.filter((name) => !/^[./]/.test(name))) {
    const file = fileURLToPath(import.meta.resolve(specifier));
    const folder = path.dirname(file);
    await typeScriptReady(file);
    for (const exported of Object.values((await import(specifier)) as Record<string, unknown>)) if (isPlugin(exported)) packageFolders.set(exported, folder);
  }
  return plugins.map((plugin) => {
    const folder = pluginFolders.get(plugin) ?? packageFolders.get(plugin);
    const version = folder === undefined ? undefined : packageVersion(folder);
    return version === undefined ? { id: plugin.id } : { id: plugin.id, version };
  });
}

/** `failing 1.2.3, other`: plugins as an operator installs them. */
export const namePlugins = (plugins: readonly PluginVersion[]): string =>
  plugins.map(({ id, version }) => (version === undefined ? id : `${id} ${version}`)).join(', ');
