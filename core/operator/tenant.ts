import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { IsolationLevel, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { App } from '../app/app.ts';
import { CORE_VERSION } from '../base/version.ts';
import { appliedMigrations, filesUnder, Staging, unpackChecked, type ArchiveManifest } from './archive.ts';
import { OperatorError, type OperatorCommand, type Report } from './command.ts';
import type { UntrustedData } from '../db/tenant-data.ts';

/**
 * `rpc-service tenant export` and `tenant import`
 * (docs/decisions/0045-moving-a-tenant.md). An archive is a gzipped tar of:
 *   manifest.json          format, subscription, versions, and each entry's rows or size and SHA-256
 *   tables/<table>.ndjson  the tenant's rows, one JSON object a line
 *   keys.json              the subscription's data keys, wrapped by the transfer key (not by a master key)
 *   files/<file id>        the bytes of each uploaded file, read from and written to the installations' FILE_STORAGE
 *   folders/<n>/...        the tenant's folder under each declared per-subscription folder
 * The transfer key is written beside the archive (`<out>.key`): the archive
 * alone opens none of the tenant's secrets.
 */
export const TENANT_FORMAT = 1;

interface TenantManifest extends ArchiveManifest {
  kind: 'tenant';
  subscriptionId: string;
  createdAt: string;
  migrations: string[];
  tables: { name: string; rows: number }[];
  folders: string[];
}

/** A per-subscription folder, named by its owner and place in the owner's declaration so the target finds its own. */
interface Folder {
  name: string;
  path: string;
}

/** Tables whose tenant rows are found by a key column; the data keys travel apart (keys.json). */
interface TenantTable {
  name: string;
  key: string;
}

const DATA_KEYS = 'core_data_key';
/** Uploaded files' bytes travel as `files/`, through each installation's FILE_STORAGE, so a tenant moves between disk and database storage alike. */
const BLOB_TABLES = ['core_blob', 'core_blob_part', 'core_blob_chunk'];
/** Where archives of earlier releases kept uploads, as a folder: placed in DATA_DIR/files, which database storage also reads. */
const FILES_FOLDER = 'core:files';
const BATCH = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * What moves with a tenant: every entity table with a subscription_id, the
 * tables plugins name, less those they leave behind; their folders; and what
 * an import takes only from an archive the operator vouches for.
 */
function tenantData(app: App): { tables: TenantTable[]; folders: Folder[]; untrusted: UntrustedData[] } {
  const contributions = app.extensions.all('core.tenantData');
  const declared = contributions.map(({ value }) => value);
  const skipped = new Set([DATA_KEYS, ...BLOB_TABLES, ...declared.flatMap((declaration) => declaration.skip ?? []).map((skip) => skip.name)]);
  const tables = new Map<string, TenantTable>();
  for (const meta of Object.values(app.deps.db.orm.getMetadata().getAll())) {
    if (!meta.tableName || meta.embeddable || meta.virtual) continue;
    const tenant = Object.values(meta.properties).some((property) => property.fieldNames?.includes('subscription_id'));
    if (tenant && !skipped.has(meta.tableName)) tables.set(meta.tableName, { name: meta.tableName, key: 'subscription_id' });
  }
  for (const declaration of declared) for (const table of declaration.tables ?? []) tables.set(table.name, table);
  const folders: Folder[] = [];
  for (const { pluginId, value } of contributions)
    (value.folders ?? []).forEach((folder, index) => folders.push({ name: `${pluginId}:${index}`, path: folder }));
  const untrusted = declared.flatMap((declaration) => declaration.untrusted ?? []);
  return { tables: [...tables.values()].sort((a, b) => a.name.localeCompare(b.name)), folders, untrusted };
}

/** The columns an insert may name: generated ones are computed by the database. */
async function insertableColumns(em: EntityManager, table: string): Promise<string[]> {
  const rows = await em.execute<{ column_name: string }[]>(
    "select column_name from information_schema.columns where table_schema = current_schema() and table_name = ? and is_generated = 'NEVER' order by ordinal_position",
    [table],
  );
  return rows.map((row) => row.column_name);
}

const quoted = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export interface TenantExportArgs {
  subscriptionId: string;
  /** Absolute path of the archive; the transfer key goes to `<out>.key`. */
  out: string;
}

export interface TenantExportResult {
  out: string;
  keyFile: string;
  rows: number;
  tables: number;
  files: number;
}

/** `tenant export`: the tenant's rows read in one repeatable-read transaction, so they are one moment's. */
export const tenantExport: OperatorCommand<TenantExportArgs, TenantExportResult> = {
  async run(app, { subscriptionId, out }, report) {
    if (!UUID.test(subscriptionId)) throw new OperatorError(`${subscriptionId} is not a subscription id (a UUID)`);
    const keyFile = `${out}.key`;
    for (const file of [out, keyFile]) if (existsSync(file)) throw new OperatorError(`${file} exists: give a new file`);
    const { db, keyring } = app.deps;
    const [found] = await db.execute('select 1 from auth_subscription where id = ?', [subscriptionId]);
    if (!found) throw new OperatorError(`no subscription ${subscriptionId} in this installation`);
    const { tables, folders } = tenantData(app);
    const staging = await Staging.open(out);
    try {
      await mkdir(staging.path('tables'));
      const counted: TenantManifest['tables'] = [];
      // The files of the same moment as the rows: those the rows name.
      let stored: { id: string; storage_path: string }[] = [];
      await db.forkEm(null).transactional(
        async (em) => {
          stored = await em.execute('select id, storage_path from core_file where subscription_id = ? order by id', [subscriptionId]);
          for (const [index, table] of tables.entries()) {
            const file = `tables/${table.name}.ndjson`;
            const stream = createWriteStream(staging.path(file));
            let rows = 0;
            for (let offset = 0; ; offset += BATCH) {
              const batch = await em.execute<{ row: string }[]>(
                `select row_to_json(t)::text as row from ${quoted(table.name)} t where ${quoted(table.key)} = ? order by ctid limit ${BATCH} offset ${offset}`,
                [subscriptionId],
              );
              for (const { row } of batch) stream.write(`${row}\n`);
              rows += batch.length;
              if (batch.length < BATCH) break;
            }
            await new Promise<void>((resolve, reject) => stream.end((error?: Error | null) => (error ? reject(error) : resolve())));
            await staging.add(file);
            counted.push({ name: table.name, rows });
            report({ label: 'records', done: index + 1, total: tables.length, unit: 'items' });
          }
        },
        { isolationLevel: IsolationLevel.REPEATABLE_READ },
      );

      const transferKey = randomBytes(32);
      await writeFile(staging.path('keys.json'), JSON.stringify(await keyring.exportDataKeys(subscriptionId, transferKey)));
      await staging.add('keys.json');

      await mkdir(staging.path('files'));
      for (const [index, file] of stored.entries()) {
        const relative = `files/${file.id}`;
        const content = await app.fileStorage.get(file.storage_path).catch((error: NodeJS.ErrnoException) => {
          // A file whose bytes are gone (a failed upload's row before its sweep) moves as the row alone, as it is here.
          if (error.code === 'ENOENT') return null;
          throw error;
        });
        if (!content) continue;
        await pipeline(content, createWriteStream(staging.path(relative)));
        await staging.add(relative);
        report({ label: 'files', done: index + 1, total: stored.length, unit: 'items' });
      }

      for (const [index, folder] of folders.entries()) {
        const source = path.join(folder.path, subscriptionId);
        for (const file of filesUnder(source)) {
          const relative = path.join('folders', String(index), file);
          await mkdir(path.dirname(staging.path(relative)), { recursive: true });
          await cp(path.join(source, file), staging.path(relative));
          await staging.add(relative);
        }
        report({ label: 'folders', done: index + 1, total: folders.length, unit: 'items' });
      }

      const migrations = await appliedMigrations(db);
      const manifest: TenantManifest = {
        format: TENANT_FORMAT,
        kind: 'tenant',
        subscriptionId,
        createdAt: new Date().toISOString(),
        serviceVersion: CORE_VERSION,
        migrations,
        tables: counted,
        folders: folders.map((folder) => folder.name),
        entries: staging.entries,
      };
      await staging.pack(out, manifest, report);
      await writeFile(keyFile, `${transferKey.toString('base64url')}\n`, { mode: 0o600 });
      const rows = counted.reduce((sum, table) => sum + table.rows, 0);
      return {
        out,
        keyFile,
        rows,
        tables: counted.filter((table) => table.rows > 0).length,
        files: staging.entries.filter((entry) => entry.path.startsWith('folders/') || entry.path.startsWith('files/')).length,
      };
    } finally {
      await staging.close();
    }
  },
};

export interface TenantImportArgs {
  from: string;
  keyFile: string;
  /** The operator vouches for the archive (their own installation wrote it): what core.tenantData declares untrusted is imported too. */
  trustSignIns?: boolean;
}

export interface TenantImportResult {
  subscriptionId: string;
  rows: number;
  files: number;
  /** What was left out as untrusted (none with trustSignIns), with the rows it took out of the archive's. */
  withheld: { what: string; rows: number; meaning: string }[];
}

/** The entries of a tenant export: the manifest names each one's place and what it may hold. */
const TENANT_ENTRY =
  /^(?:keys\.json|tables\/[a-z][a-z0-9_]{0,62}\.ndjson|files\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|folders\/\d+\/.+)$/;

/** Why a tenant manifest's own listing (tables, folders, entries) is not one tenant export writes. */
function tenantManifestProblem(manifest: TenantManifest): string | undefined {
  const { tables, folders, entries } = manifest;
  if (!Array.isArray(tables) || !Array.isArray(folders) || !Array.isArray(entries)) return 'its manifest lists no tables, folders or entries';
  const listed = new Set(entries.map((entry) => entry?.path));
  const misplaced = [...listed].find((name) => typeof name === 'string' && !TENANT_ENTRY.test(name));
  if (misplaced !== undefined) return `its manifest lists ${JSON.stringify(misplaced)}, which is no place in a tenant export`;
  if (!listed.has('keys.json')) return 'its manifest lists no keys.json';
  const names = new Set<string>();
  for (const table of tables as Partial<TenantManifest['tables'][number]>[]) {
    const { name, rows } = table ?? {};
    if (typeof name !== 'string' || typeof rows !== 'number' || !Number.isSafeInteger(rows) || rows < 0 || names.has(name))
      return 'its manifest lists its tables wrong';
    names.add(name);
    if (rows > 0 && !listed.has(`tables/${name}.ndjson`)) return `its manifest lists no tables/${name}.ndjson for the ${rows} rows of ${name}`;
  }
  if (folders.some((folder) => typeof folder !== 'string')) return 'its manifest lists its folders wrong';
  return undefined;
}

/** Unpacks and checks a tenant export: another kind of archive, a newer format, an altered entry or one out of a tenant export's layout is refused. */
const unpack = (from: string, into: string, report: Report): Promise<TenantManifest> =>
  unpackChecked<TenantManifest>(
    from,
    into,
    'a tenant export',
    (manifest) => {
      if (manifest.kind !== 'tenant') throw new OperatorError(`${from} is not a tenant export (a backup is restored with rpc-service restore)`);
      if (typeof manifest.format !== 'number' || manifest.format > TENANT_FORMAT) {
        throw new OperatorError(`${from} is tenant export format ${manifest.format}, newer than this version reads (${TENANT_FORMAT})`);
      }
      if (typeof manifest.subscriptionId !== 'string' || !UUID.test(manifest.subscriptionId))
        throw new OperatorError(`${from}: the manifest names no subscription`);
      const problem = tenantManifestProblem(manifest);
      if (problem) throw new OperatorError(`${from}: ${problem}: it was altered`);
    },
    report,
  );

/**
 * What a row of these tables must hold besides its tenant column, being the
 * subscription's: a file's bytes are read and deleted at `storage_path`
 * (core/uploads/upload-service.ts), so a row naming another file's place
 * would serve or delete another tenant's bytes.
 */
const ROW_RULES: Record<string, (row: Record<string, unknown>, subscriptionId: string) => string | undefined> = {
  core_file: (row, subscriptionId) =>
    row.storage_path === `${subscriptionId}/${String(row.id)}` ? undefined : `its storage_path ${JSON.stringify(row.storage_path)} is not the file's own`,
};

/**
 * The rows of a table in an unpacked tenant export, one at a time, each
 * checked to be the subscription's: an object whose tenant column (the
 * table's key, here, not the archive's) is the manifest's subscription, and
 * that follows the table's rule above; as many as the manifest says. The
 * archive's checksums only show it was not damaged on the way: whoever made
 * it could write any row, so anything else refuses the whole archive.
 */
async function* tenantRows(from: string, staging: string, table: TenantTable, rows: number, subscriptionId: string): AsyncGenerator<Record<string, unknown>> {
  const file = `tables/${table.name}.ndjson`;
  const refused = (line: number, why: string) =>
    new OperatorError(`${from}: line ${line} of ${file} ${why}: the archive was altered, and nothing of it was imported`);
  let line = 0;
  for await (const text of createInterface({ input: createReadStream(path.join(staging, file)), crlfDelay: Infinity })) {
    line++;
    let row: unknown;
    try {
      row = JSON.parse(text);
    } catch {
      throw refused(line, 'is not a row');
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw refused(line, 'is not a row');
    const record = row as Record<string, unknown>;
    if (record[table.key] !== subscriptionId) {
      throw refused(line, `is a row of ${table.key} ${JSON.stringify(record[table.key])}, not of the subscription ${subscriptionId} the archive moves`);
    }
    const broken = ROW_RULES[table.name]?.(record, subscriptionId);
    if (broken) throw refused(line, broken);
    yield record;
  }
  if (line !== rows)
    throw new OperatorError(`${from}: ${file} holds ${line} rows where its manifest says ${rows}: the archive was altered, and nothing of it was imported`);
}

/** Sets a row's columns to the values in `reset`; true when the row held another value in one of them. */
function resetColumns(row: Record<string, unknown>, reset: NonNullable<UntrustedData['reset']>): boolean {
  let changed = false;
  for (const [column, value] of Object.entries(reset)) {
    if (row[column] !== undefined && row[column] !== value) changed = true;
    row[column] = value;
  }
  return changed;
}

/**
 * `tenant import`: refused when the subscription exists here, a table is
 * missing (a plugin this installation lacks) or the key does not open the
 * data keys; otherwise the files are put in place and every row inserted in
 * one transaction, the data keys wrapped by this installation's master key.
 * What plugins declare untrusted (core.tenantData) is left out of the rows
 * unless the operator vouches for the archive (`trustSignIns`).
 */
export const tenantImport: OperatorCommand<TenantImportArgs, TenantImportResult> = {
  mayCreate: true,
  async run(app, { from, keyFile, trustSignIns }, report) {
    if (!existsSync(keyFile)) throw new OperatorError(`${keyFile} does not exist: give the .key file tenant export wrote beside the archive (--key-file)`);
    const transferKey = Buffer.from((await readFile(keyFile, 'utf8')).trim(), 'base64url');
    if (transferKey.length !== 32) throw new OperatorError(`${keyFile} does not hold a transfer key`);
    const { db, keyring } = app.deps;
    const staging = await mkdtemp(path.join(app.config.dataDir, '.tenant-import-'));
    const placed: string[] = [];
    /** Files put in the storage, deleted again if the import fails. */
    const stored: string[] = [];
    try {
      const manifest = await unpack(from, staging, report);
      const { subscriptionId } = manifest;
      const [exists] = await db.execute('select 1 from auth_subscription where id = ?', [subscriptionId]);
      if (exists) throw new OperatorError(`subscription ${subscriptionId} already exists in this installation`);
      const declared = tenantData(app);
      const here = new Map(declared.tables.map((table) => [table.name, table]));
      const untrusted = trustSignIns === true ? [] : declared.untrusted;
      const missing = manifest.tables.filter((table) => table.rows > 0 && !here.has(table.name)).map((table) => table.name);
      if (missing.length > 0) throw new OperatorError(`this installation has no table ${missing.join(', ')}: load the plugins the source installation had`);
      let keys: ReturnType<typeof keyring.importedDataKeys>;
      try {
        keys = keyring.importedDataKeys(subscriptionId, JSON.parse(await readFile(path.join(staging, 'keys.json'), 'utf8')), transferKey);
      } catch {
        throw new OperatorError(`${keyFile} does not open the data keys of ${from}: it is the key of another export`);
      }
      // Every row is checked before anything is written; the files' bytes go only where the files' rows say.
      const fileIds = new Set<string>();
      for (const table of manifest.tables.filter((candidate) => candidate.rows > 0)) {
        for await (const row of tenantRows(from, staging, here.get(table.name)!, table.rows, subscriptionId)) {
          if (table.name === 'core_file') fileIds.add(String(row.id));
        }
      }
      const stray = manifest.entries.find((entry) => entry.path.startsWith('files/') && !fileIds.has(entry.path.slice('files/'.length)));
      if (stray) throw new OperatorError(`${from}: ${stray.path} is the bytes of none of its files: the archive was altered`);

      const folders = [...declared.folders, { name: FILES_FOLDER, path: path.join(app.config.dataDir, 'files') }];
      let files = 0;
      for (const entry of manifest.entries.filter((candidate) => candidate.path.startsWith('files/'))) {
        const storagePath = `${subscriptionId}/${entry.path.slice('files/'.length)}`;
        await app.fileStorage.put(storagePath, createReadStream(path.join(staging, entry.path)));
        stored.push(storagePath);
        files++;
      }
      for (const [index, name] of manifest.folders.entries()) {
        const folder = folders.find((candidate) => candidate.name === name);
        const source = path.join(staging, 'folders', String(index));
        if (!existsSync(source)) continue;
        if (!folder) throw new OperatorError(`this installation keeps no folder ${name}: load the plugins the source installation had`);
        const target = path.join(folder.path, subscriptionId);
        if (existsSync(target)) throw new OperatorError(`${target} exists: remove what a past import left, then import again`);
        await cp(source, target, { recursive: true });
        placed.push(target);
        files += filesUnder(target).length;
      }

      let rows = 0;
      /** Rows each untrusted declaration took out of the archive's. */
      const withheld = new Map<UntrustedData, number>();
      let table = DATA_KEYS;
      await db
        .forkEm(null)
        .transactional(async (em) => {
          for (const key of keys) {
            await em.execute(`insert into ${DATA_KEYS} (id, subscription_id, wraps, created_at) values (?, ?, ?::jsonb, now())`, [
              key.id,
              key.subscription_id,
              JSON.stringify(key.wraps),
            ]);
          }
          for (const [index, listed] of manifest.tables.entries()) {
            if (listed.rows === 0) continue;
            table = listed.name;
            const rules = untrusted.filter((rule) => rule.table === listed.name);
            const leftOut = rules.find((rule) => !rule.reset);
            if (leftOut) {
              withheld.set(leftOut, listed.rows);
              continue;
            }
            const columns = (await insertableColumns(em, table)).map(quoted).join(', ');
            let batch: string[] = [];
            const flush = async () => {
              if (batch.length === 0) return;
              await em.execute(`insert into ${quoted(table)} (${columns}) select ${columns} from json_populate_recordset(null::${quoted(table)}, ?::json)`, [
                `[${batch.join(',')}]`,
              ]);
              rows += batch.length;
              batch = [];
            };
            // Read and checked again, and inserted as checked: written out anew, a row holds each column once.
            for await (const row of tenantRows(from, staging, here.get(table)!, listed.rows, subscriptionId)) {
              for (const rule of rules) if (resetColumns(row, rule.reset!)) withheld.set(rule, (withheld.get(rule) ?? 0) + 1);
              batch.push(JSON.stringify(row));
              if (batch.length === BATCH) await flush();
            }
            await flush();
            report({ label: 'records', done: index + 1, total: manifest.tables.length, unit: 'items' });
          }
        })
        .catch((error: unknown) => {
          // A key unique across the installation (an e-mail, a username, an API key's prefix, a sign-in provider's account) held by another tenant here.
          if (!(error instanceof UniqueConstraintViolationException)) throw error;
          const constraint = (error as { constraint?: string }).constraint ?? table;
          throw new OperatorError(`${from}: a row of ${table} is already in this installation (${constraint}): nothing of the archive was imported`);
        });
      return { subscriptionId, rows, files, withheld: [...withheld].map(([{ what, meaning }, count]) => ({ what, rows: count, meaning })) };
    } catch (error) {
      for (const target of placed) await rm(target, { recursive: true, force: true });
      for (const storagePath of stored) await app.fileStorage.delete(storagePath);
      throw error;
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  },
};
