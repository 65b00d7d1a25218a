/**
 * Every reason the loader refuses a plugin, as a code. Tests match the code;
 * the message names the plugin and what to fix.
 */
export const PLUGIN_ERROR_CODES = [
  'PLUGIN_IMPORT_FAILED',
  'PLUGIN_SDK_COPY',
  'PLUGIN_SDK_UNRESOLVED',
  'PLUGIN_NOT_WRAPPED',
  'PLUGIN_NOT_EXPORTED',
  'PLUGIN_INVALID_ID',
  'PLUGIN_DUPLICATE_ID',
  'PLUGIN_INVALID_GROUP',
  'PLUGIN_DUPLICATE_GROUP',
  'PLUGIN_CORE_VERSION',
  'PLUGIN_OPERATION_OUTSIDE_GROUP',
  'PLUGIN_INVALID_OPERATION',
  'PLUGIN_PUBLIC_OPERATION',
  'PLUGIN_MISSING_DEPENDENCY',
  'PLUGIN_DEPENDENCY_CYCLE',
  'PLUGIN_TABLE_PREFIX',
  'PLUGIN_DUPLICATE_SERVICE',
  'PLUGIN_UNKNOWN_SERVICE',
  'PLUGIN_INVALID_EXPORT',
  'PLUGIN_INVALID_EXTENSION_POINT',
  'PLUGIN_UNKNOWN_EXTENSION_POINT',
  'PLUGIN_INVALID_CONTRIBUTION',
  'PLUGIN_INVALID_CONFIG_SCHEMA',
  'PLUGIN_DUPLICATE_SETTING',
  'PLUGIN_INVALID_MIGRATION',
  'PLUGIN_INVALID_JOB',
  'PLUGIN_INVALID_ERROR_CODE',
  'PLUGIN_DUPLICATE_ERROR_CODE',
] as const;

export type PluginErrorCode = (typeof PLUGIN_ERROR_CODES)[number];

export class PluginLoadError extends Error {
  readonly code: PluginErrorCode;

  constructor(code: PluginErrorCode, message: string) {
    super(message);
    this.name = 'PluginLoadError';
    this.code = code;
  }
}
