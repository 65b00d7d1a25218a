type Node = Record<string, unknown>;

/** A workflow graph: start, then each node in turn, then an end node `done` answering `output` (an expression), or the variables without it. */
export function linearGraph(nodes: Node[], output?: string): { nodes: Node[]; edges: { source: string; target: string }[] } {
  const ids = ['start', ...nodes.map((node) => node.id as string), 'done'];
  return {
    nodes: [{ id: 'start', type: 'start' }, ...nodes, { id: 'done', type: 'end', config: output === undefined ? {} : { output } }],
    edges: ids.slice(1).map((target, index) => ({ source: ids[index]!, target })),
  };
}
