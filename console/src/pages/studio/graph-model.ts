/**
 * The Studio's graph decisions, free of React and the DOM (tested in
 * `test/console/studio-model.test.ts`): which nodes are subgraphs, how a subgraph collapses into
 * one node, where every node sits, and which drawn node a streamed task belongs to.
 */
import dagre from "@dagrejs/dagre";

/** `GET /assistants/{id}/graph?xray=true`: LangGraph's drawable graph as JSON. */
export interface GraphJson {
  nodes: Array<{ id: string; type?: string; data?: unknown; metadata?: unknown }>;
  edges: Array<{ source: string; target: string; conditional?: boolean; data?: unknown }>;
}

export interface DrawnNode {
  id: string;
  label: string;
  kind: "start" | "end" | "node" | "subgraph";
  /** The subgraph this node sits in when expanded ("" at the top). */
  parent: string;
  x: number;
  y: number;
  width: number;
  height: number;
}
export interface DrawnEdge {
  id: string;
  source: string;
  target: string;
  conditional: boolean;
}

export const NODE_W = 150;
export const NODE_H = 40;

/** Subgraph ids: every proper prefix of an xray node id (`research:search` → `research`). */
export function subgraphsOf(g: GraphJson): string[] {
  const out = new Set<string>();
  for (const n of g.nodes) {
    const parts = n.id.split(":");
    for (let k = 1; k < parts.length; k++) out.add(parts.slice(0, k).join(":"));
  }
  return [...out].sort();
}

/** The node drawn for a full path: the outermost collapsed subgraph containing it, or itself. */
export function visibleId(path: string, subgraphs: Set<string>, expanded: Set<string>): string {
  const parts = path.split(":");
  for (let k = 1; k < parts.length; k++) {
    const prefix = parts.slice(0, k).join(":");
    if (subgraphs.has(prefix) && !expanded.has(prefix)) return prefix;
  }
  return path;
}

const labelOf = (id: string) => (id === "__start__" ? "start" : id === "__end__" ? "end" : id.split(":").pop()!);

/**
 * The graph as drawn: collapsed subgraphs become one node, their inner edges disappear and the
 * edges crossing their border are kept once. Laid out top to bottom by dagre.
 */
export function layoutGraph(g: GraphJson, expanded: Set<string>): { nodes: DrawnNode[]; edges: DrawnEdge[] } {
  const subs = new Set(subgraphsOf(g));
  const ids = new Map<string, DrawnNode>();
  for (const n of g.nodes) {
    const id = visibleId(n.id, subs, expanded);
    if (ids.has(id)) continue;
    const kind = id === "__start__" ? "start" : id === "__end__" ? "end" : subs.has(id) ? "subgraph" : "node";
    const parent = id.includes(":") ? id.split(":").slice(0, -1).join(":") : "";
    ids.set(id, {
      id,
      label: labelOf(id),
      kind,
      parent,
      x: 0,
      y: 0,
      width: kind === "start" || kind === "end" ? 90 : NODE_W,
      height: NODE_H,
    });
  }
  const edges = new Map<string, DrawnEdge>();
  for (const e of g.edges) {
    const source = visibleId(e.source, subs, expanded);
    const target = visibleId(e.target, subs, expanded);
    if (source === target) continue;
    const id = `${source}->${target}`;
    const prev = edges.get(id);
    edges.set(id, {
      id,
      source,
      target,
      conditional: prev ? prev.conditional && Boolean(e.conditional) : Boolean(e.conditional),
    });
  }
  const d = new dagre.graphlib.Graph();
  d.setGraph({ rankdir: "TB", nodesep: 30, ranksep: 45, marginx: 10, marginy: 10 });
  d.setDefaultEdgeLabel(() => ({}));
  for (const n of ids.values()) d.setNode(n.id, { width: n.width, height: n.height });
  for (const e of edges.values()) if (ids.has(e.source) && ids.has(e.target)) d.setEdge(e.source, e.target);
  dagre.layout(d);
  const nodes = [...ids.values()].map((n) => {
    const p = d.node(n.id);
    return { ...n, x: Math.round(p.x - n.width / 2), y: Math.round(p.y - n.height / 2) };
  });
  return { nodes, edges: [...edges.values()] };
}

/**
 * A `tasks` stream event (`tasks` or `tasks|research:<task id>|…` from a subgraph) → the node's
 * full path and whether it starts or ends. A task's start carries `input`, its end `result` or `error`.
 */
export function taskEvent(event: string, data: unknown): { path: string; id: string; phase: "start" | "end" } | null {
  const [mode, ...ns] = event.split("|");
  if (mode !== "tasks" || !data || typeof data !== "object") return null;
  const t = data as {
    id?: string;
    name?: string;
    input?: unknown;
    result?: unknown;
    error?: unknown;
    triggers?: unknown;
  };
  if (typeof t.name !== "string") return null;
  const path = [...ns.map((p) => p.split(":")[0]), t.name].join(":");
  const phase = "triggers" in t || "input" in t ? "start" : "end";
  return { path, id: t.id ?? path, phase };
}

/** The drawn nodes running now, from the tasks started and not yet ended. */
export function runningNodes(running: Map<string, string>, subgraphs: Set<string>, expanded: Set<string>): Set<string> {
  return new Set([...running.values()].map((p) => visibleId(p, subgraphs, expanded)));
}

export type NodeState = "running" | "next" | "visited" | "idle";

/** How a drawn node is highlighted: running wins over next, next over visited. */
export function nodeState(id: string, running: Set<string>, next: string[], visited: Set<string>): NodeState {
  return running.has(id) ? "running" : next.includes(id) ? "next" : visited.has(id) ? "visited" : "idle";
}

/**
 * Where and how big React Flow draws a node, from the layout. The size is handed over as already
 * measured: React Flow hides a node it has not measured (and drops its edges' ends), and every
 * highlight change gives it new node objects, so a node left to be measured again would blink out
 * on each task event, for the whole of a short task on a busy machine.
 */
export function nodeFrame(n: DrawnNode): {
  position: { x: number; y: number };
  width: number;
  height: number;
  measured: { width: number; height: number };
  type: "input" | "output" | "default";
} {
  return {
    position: { x: n.x, y: n.y },
    width: n.width,
    height: n.height,
    measured: { width: n.width, height: n.height },
    type: n.kind === "start" ? "input" : n.kind === "end" ? "output" : "default",
  };
}
