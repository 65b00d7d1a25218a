import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { IsolationLevel } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { App } from '../app.ts';
import { CORE_VERSION } from '../version.ts';
import { appliedMigrations, filesUnder, Staging, unpackChecked, type ArchiveManifest } from './archive.ts';
import { OperatorError, type OperatorCommand, type Report } from './command.ts';

/**
 * `rpc-service tenant export` and `tenant import` (docs/decisions.md,
 * "Moving a tenant"). An archive is a gzipped tar of:
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

/** What moves with a tenant: every entity table with a subscription_id, the tables plugins name, less those they leave behind; and their folders. */
function tenantData(app: App): { tables: TenantTable[]; folders: Folder[] } {
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
  return { tables: [...tables.values()].sort((a, b) => a.name.localeCompare(b.name)), folders };
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
}

export interface TenantImportResult {
  subscriptionId: string;
  rows: number;
  files: number;
}

/** Unpacks and checks a tenant export: another kind of archive, a newer format or an altered entry is refused. */
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
      if (!UUID.test(manifest.subscriptionId)) throw new OperatorError(`${from}: the manifest names no subscription`);
    },
    report,
  );

/**
 * `tenant import`: refused when the subscription exists here, a table is
 * missing (a plugin this installation lacks) or the key does not open the
 * data keys; otherwise the files are put in place and every row inserted in
 * one transaction, the data keys wrapped by this installation's master key.
 */
export const tenantImport: OperatorCommand<TenantImportArgs, TenantImportResult> = {
  mayCreate: true,
  async run(app, { from, keyFile }, report) {
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
      const here = new Map(tenantData(app).tables.map((table) => [table.name, table]));
      const missing = manifest.tables.filter((table) => table.rows > 0 && !here.has(table.name)).map((table) => table.name);
      if (missing.length > 0) throw new OperatorError(`this installation has no table ${missing.join(', ')}: load the plugins the source installation had`);
      let keys: ReturnType<typeof keyring.importedDataKeys>;
      try {
        keys = keyring.importedDataKeys(subscriptionId, JSON.parse(await readFile(path.join(staging, 'keys.json'), 'utf8')), transferKey);
      } catch {
        throw new OperatorError(`${keyFile} does not open the data keys of ${from}: it is the key of another export`);
      }

      const folders = [...tenantData(app).folders, { name: FILES_FOLDER, path: path.join(app.config.dataDir, 'files') }];
      let files = 0;
      for (const entry of manifest.entries.filter((candidate) => candidate.path.startsWith('files/'))) {
        const storagePath = `${subscriptionId}/${path.basename(entry.path)}`;
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
      await db.forkEm(null).transactional(async (em) => {
        for (const key of keys) {
          await em.execute(`insert into ${DATA_KEYS} (id, subscription_id, wraps, created_at) values (?, ?, ?::jsonb, now())`, [
            key.id,
            key.subscription_id,
            JSON.stringify(key.wraps),
          ]);
        }
        for (const [index, table] of manifest.tables.entries()) {
          if (table.rows === 0) continue;
          const columns = (await insertableColumns(em, table.name)).map(quoted).join(', ');
          const lines = createInterface({ input: createReadStream(path.join(staging, 'tables', `${table.name}.ndjson`)) });
          let batch: string[] = [];
          const flush = async () => {
            if (batch.length === 0) return;
            await em.execute(
              `insert into ${quoted(table.name)} (${columns}) select ${columns} from json_populate_recordset(null::${quoted(table.name)}, ?::json)`,
              [`[${batch.join(',')}]`],
            );
            rows += batch.length;
            batch = [];
          };
          for await (const line of lines) {
            batch.push(line);
            if (batch.length === BATCH) await flush();
          }
          await flush();
          report({ label: 'records', done: index + 1, total: manifest.tables.length, unit: 'items' });
        }
      });
      return { subscriptionId, rows, files };
    } catch (error) {
      for (const target of placed) await rm(target, { recursive: true, force: true });
      for (const storagePath of stored) await app.fileStorage.delete(storagePath);
      throw error;
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  },
};
