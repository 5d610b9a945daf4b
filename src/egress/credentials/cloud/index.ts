/** Public surface of the cloud credential engines; the proxy imports from here. */
export { createCloudEngines, type CloudEngines, type CloudRulesInput, type CloudEngineDeps } from "./cloud-engines.ts";
export {
  createAwsSigningEngine,
  type AwsOutboundRequest,
  type AwsOutcome,
  type AwsSigningEngine,
} from "./aws-signing-engine.ts";
export { AwsRefusal, awsRefusalResponse } from "./aws-refusal.ts";
export { isAwsHost } from "./aws-hosts.ts";
export {
  createGoogleBearerEngine,
  type GoogleOutboundRequest,
  type GoogleOutcome,
  type GoogleBearerEngine,
} from "./google-bearer-engine.ts";
export { GoogleTokenUnavailable } from "./google-token-minter.ts";
export { handleMetadataRequest, type MetadataIdentity } from "./google-metadata-emulator.ts";
export { isGoogleApiHost, isGoogleMetadataHost, isGoogleTokenEndpoint } from "./google-hosts.ts";
export {
  CallbackResolver,
  CallbackResolutionError,
  type CallbackSpec,
  type CallbackFetch,
} from "./callback-resolver.ts";
export { pairsFromRawHeaders, type HeaderPairs } from "./header-pairs.ts";
export type { CloudAuditEvent, CloudAuditSink } from "./cloud-audit.ts";
export { AWS_PLACEHOLDER_ACCESS_KEY_ID, AWS_PLACEHOLDER_SECRET_ACCESS_KEY } from "./placeholder-credentials.ts";
export { GOOGLE_COMPAT_ACCESS_TOKEN } from "./google-compat-credentials.ts";
