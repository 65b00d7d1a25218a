import { adminCreate } from './admin.ts';
import { backup } from './backup.ts';
import type { OperatorCommand } from './command.ts';
import { doctor } from './doctor.ts';
import { jobsList, jobsPurge, jobsRetry } from './jobs.ts';
import { filesToDatabase } from './files.ts';
import { tenantExport, tenantImport } from './tenant.ts';

/** The commands a serving process answers on its control socket, and the command line runs itself when none serves. */
export const OPERATOR_COMMANDS: Readonly<Record<string, OperatorCommand<never>>> = {
  backup,
  'admin create': adminCreate,
  doctor,
  'jobs list': jobsList,
  'jobs retry': jobsRetry,
  'jobs purge': jobsPurge,
  'tenant export': tenantExport,
  'tenant import': tenantImport,
  'files to-database': filesToDatabase,
};
