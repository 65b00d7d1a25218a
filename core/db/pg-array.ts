/**
 * A PostgreSQL array literal, for a `?::text[]` (or `::uuid[]`, `::int[]`)
 * parameter: the driver would spread a JavaScript array into a list of
 * parameters instead.
 */
export function pgArray(values: readonly (string | number | null)[]): string {
  return `{${values.map((value) => (value === null ? 'NULL' : `"${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`)).join(',')}}`;
}
