/**
 * The egress proxy's one public surface. The sandboxes and deployments areas attach a network
 * namespace (listeners, policy, sealed values) through `attachEgress`; the sandboxes API validates,
 * stores and presents `proxy_config` through the config functions; the platform mounts the feature.
 */
export {
  attachEgress,
  egressAvailable,
  egressCaptureSpec,
  egressLog,
  prepareEgress,
  releaseEgressValues,
  type EgressAttachment,
  type EgressTarget,
  type PreparedEgress,
} from "./attach.ts";
export {
  proxyConfigSchema,
  prepareProxyConfig,
  presentProxyConfig,
  type StoredProxyConfig,
} from "./config/proxy-config.ts";
export { auditEntrySchema, createEgressFeature } from "./egress-feature.ts";
export { describeRefusal, refusalAdvice, watchDistinctRefusals, watchEgressRefusals } from "./audit/refusals.ts";
/** Sealed columns of the egress area, for master-key rotation and its tests. */
export { workspaceCa } from "./proxy/ca-store.ts";
export { openValues, sealValue } from "./credentials/sealed-values.ts";
/** The egress address policy for the platform's own fetches on a tenant's behalf (image pulls, source clones, run webhooks). */
export {
  checkOutboundUrl,
  outboundPolicy,
  REFUSAL_HINT,
  type OutboundPolicy,
  type OutboundSettings,
} from "./outbound/outbound-policy.ts";
export { startOutboundProxy, type OutboundProxy } from "./outbound/outbound-proxy.ts";
export { OutboundRefused, OutboundTooLarge, runWithOutboundPolicy } from "./outbound/run-with-policy.ts";
