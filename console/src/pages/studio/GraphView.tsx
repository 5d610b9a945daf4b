import { useMemo } from "react";
import { Background, Controls, MarkerType, ReactFlow, type Edge, type Node } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { layoutGraph, nodeFrame, nodeState, subgraphsOf, type GraphJson } from "./graph-model.ts";

/**
 * The assistant's graph (dagre layout, drawn by React Flow): subgraphs collapse to one node and
 * expand on a click or from the buttons above; running nodes glow, nodes this run went through
 * are marked.
 */
export function GraphView(props: {
  graph: GraphJson;
  expanded: Set<string>;
  onToggle: (id: string) => void;
  running: Set<string>;
  visited: Set<string>;
  next: string[];
}) {
  const { graph, expanded, running, visited } = props;
  const subgraphs = useMemo(() => subgraphsOf(graph), [graph]);
  const drawn = useMemo(() => layoutGraph(graph, expanded), [graph, expanded]);
  const nodes: Node[] = drawn.nodes.map((n) => {
    const state = nodeState(n.id, running, props.next, visited);
    return {
      id: n.id,
      ...nodeFrame(n),
      data: {
        label: (
          <span className="gnode-label" data-node={n.id} data-state={state} title={n.id}>
            {n.parent ? <span className="gnode-parent">{n.parent} › </span> : null}
            {n.label}
            {n.kind === "subgraph" ? (
              <span className="gnode-more" aria-hidden="true">
                {" "}
                ⊕
              </span>
            ) : null}
          </span>
        ),
      },
      className: `gnode ${n.kind} ${state}`,
      draggable: false,
      connectable: false,
    };
  });
  const edges: Edge[] = drawn.edges.map((e) => ({
    id: e.id,
    source: e.source,
    target: e.target,
    className: e.conditional ? "conditional" : "",
    style: e.conditional ? { strokeDasharray: "5 4" } : undefined,
    markerEnd: { type: MarkerType.ArrowClosed },
  }));
  return (
    <div className="graph-wrap">
      {subgraphs.length ? (
        <div className="row wrap subgraph-toggles">
          {subgraphs.map((s) => (
            <button
              key={s}
              type="button"
              className="small"
              aria-pressed={expanded.has(s)}
              onClick={() => props.onToggle(s)}
            >
              {expanded.has(s) ? `Collapse ${s}` : `Expand ${s}`}
            </button>
          ))}
        </div>
      ) : null}
      <div
        className="graph"
        data-testid="graph"
        role="group"
        aria-label={`Graph: ${drawn.nodes.map((n) => n.id).join(", ")}`}
      >
        <ReactFlow
          // A subgraph opened or closed changes the drawing's size: fit it to the view again.
          key={[...expanded].sort().join(",")}
          nodes={nodes}
          edges={edges}
          fitView
          nodesDraggable={false}
          nodesConnectable={false}
          elementsSelectable={false}
          onNodeClick={(_, n) => subgraphs.includes(n.id) && props.onToggle(n.id)}
          minZoom={0.3}
          proOptions={{ hideAttribution: false }}
        >
          <Background gap={16} />
          <Controls showInteractive={false} />
        </ReactFlow>
      </div>
    </div>
  );
}
