/**
 * The JSON-RPC 2.0 number of each of our codes (docs/decisions/0039-json-rpc-2-0.md),
 * for the JSON-RPC answers and the OpenRPC document: the
 * protocol's own where one fits, else read off the code's HTTP status.
 */
const FIXED_CODES: Readonly<Record<string, number>> = {
  BAD_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  VALIDATION_ERROR: -32602,
  INTERNAL: -32603,
  QUOTA_EXCEEDED: -32030,
};

/** The fixed ones, else -32000 - (status - 400) for a 4xx status and -32000 - status for a 5xx. */
export const jsonRpcCode = (code: string, status: number): number => FIXED_CODES[code] ?? (status < 500 ? -32000 - (status - 400) : -32000 - status);

/** JSON-RPC's number for a body that is not JSON. */
export const PARSE_ERROR = -32700;
