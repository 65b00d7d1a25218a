import * as v from 'valibot';
import { validationError, type ValidationIssue } from 'rpc-service/plugin';
import { expression } from './node-types.ts';

export const MAX_NODES = 500;
export const MAX_EDGES = 2000;

const id = (label: string) =>
  v.pipe(v.string(`${label} must be a string`), v.minLength(1, `${label} must not be empty`), v.maxLength(100, `${label} must be at most 100 characters`));

export const nodeSchema = v.object({
  id: id('id'),
  type: id('type'),
  name: v.optional(v.pipe(v.string('name must be a string'), v.maxLength(200, 'name must be at most 200 characters'))),
  config: v.optional(v.record(v.string(), v.unknown(), 'config must be an object'), {}),
});
export const edgeSchema = v.object({ source: id('source'), target: id('target'), condition: v.optional(expression('condition')) });

export const graphFields = {
  nodes: v.pipe(v.array(nodeSchema, 'nodes must be an array'), v.maxLength(MAX_NODES, `at most ${MAX_NODES} nodes`)),
  edges: v.pipe(v.array(edgeSchema, 'edges must be an array'), v.maxLength(MAX_EDGES, `at most ${MAX_EDGES} edges`)),
};

export type WorkflowNode = v.InferOutput<typeof nodeSchema>;
export type WorkflowEdge = v.InferOutput<typeof edgeSchema>;

/** What else a node's config must satisfy beyond its schema (a tool that exists, a model of the catalogue): issues, as messages. */
export type ReferenceCheck = (node: WorkflowNode) => string[];

/**
 * Checks a graph before it is saved, naming the node or edge at fault: each
 * node's type is known and its config passes the type's schema (expressions
 * compile), ids are unique, edges join existing nodes, there is one start
 * node, every node can be reached from it, an end node ends every path
 * (only end nodes lack an edge out, and none leaves them). Returns the
 * nodes with their configs as parsed (defaults filled in).
 */
export function checkGraph(
  nodes: WorkflowNode[],
  edges: WorkflowEdge[],
  configSchemas: ReadonlyMap<string, v.GenericSchema>,
  checkReferences: ReferenceCheck,
): WorkflowNode[] {
  const issues: ValidationIssue[] = [];
  const byId = new Map<string, number>();
  const parsed = nodes.map((node, index) => {
    const at = `nodes.${index}`;
    if (byId.has(node.id)) issues.push({ path: `${at}.id`, message: `node "${node.id}": another node has this id` });
    else byId.set(node.id, index);
    const schema = configSchemas.get(node.type);
    if (!schema) {
      issues.push({ path: `${at}.type`, message: `node "${node.id}": unknown node type "${node.type}"; known: ${[...configSchemas.keys()].join(', ')}` });
      return node;
    }
    const result = v.safeParse(schema, node.config);
    if (!result.success) {
      for (const issue of result.issues) {
        const key = v.getDotPath(issue);
        issues.push({ path: key ? `${at}.config.${key}` : `${at}.config`, message: `node "${node.id}": ${issue.message}` });
      }
      return node;
    }
    const checked = { ...node, config: result.output as Record<string, unknown> };
    for (const message of checkReferences(checked)) issues.push({ path: `${at}.config`, message: `node "${node.id}": ${message}` });
    return checked;
  });

  const typeOf = (nodeId: string) => nodes[byId.get(nodeId)!]!.type;
  const outgoing = new Map<string, string[]>();
  edges.forEach((edge, index) => {
    const at = `edges.${index}`;
    const source = byId.has(edge.source);
    const target = byId.has(edge.target);
    if (!source) issues.push({ path: `${at}.source`, message: `edge ${index}: no node "${edge.source}"` });
    if (!target) issues.push({ path: `${at}.target`, message: `edge ${index}: no node "${edge.target}"` });
    if (!source || !target) return;
    if (typeOf(edge.source) === 'end') issues.push({ path: `${at}.source`, message: `node "${edge.source}" is an end node: no edge may leave it` });
    if (typeOf(edge.target) === 'start') issues.push({ path: `${at}.target`, message: `node "${edge.target}" is the start node: no edge may enter it` });
    outgoing.set(edge.source, [...(outgoing.get(edge.source) ?? []), edge.target]);
  });

  const starts = nodes.filter((node) => node.type === 'start');
  if (starts.length !== 1) {
    issues.push({
      path: 'nodes',
      message:
        starts.length === 0
          ? 'a workflow needs a start node'
          : `a workflow has one start node, not ${starts.length} (${starts.map((node) => `"${node.id}"`).join(', ')})`,
    });
  }
  if (!nodes.some((node) => node.type === 'end')) issues.push({ path: 'nodes', message: 'a workflow needs an end node' });
  if (starts.length === 1) {
    const reached = new Set([starts[0]!.id]);
    for (const queue = [starts[0]!.id]; queue.length > 0;) {
      for (const next of outgoing.get(queue.shift()!) ?? []) {
        if (!reached.has(next)) {
          reached.add(next);
          queue.push(next);
        }
      }
    }
    nodes.forEach((node, index) => {
      if (byId.get(node.id) !== index) return;
      if (!reached.has(node.id)) {
        issues.push({
          path: `nodes.${index}`,
          message: `node "${node.id}"${node.type === 'end' ? ' (an end node)' : ''} cannot be reached from the start node`,
        });
      } else if (node.type !== 'end' && !outgoing.has(node.id)) {
        issues.push({ path: `nodes.${index}`, message: `node "${node.id}" has no edge to follow (only end nodes may end a run)` });
      }
    });
  }
  if (issues.length > 0) throw validationError(issues);
  return parsed;
}
