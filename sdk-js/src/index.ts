/**
 * @hashee/sdk: the wire of docs/wire-spec.md at both ends, and the checks of SPEC §6 and §9.
 * This entry point runs in browsers and in Node ≥ 18 (no `node:` import); the Node-only
 * store lives in "@hashee/sdk/node".
 */
export * from "./errors.js";
export { b64decode, b64encode, b64url, b64urlDecode } from "./encoding.js";
export { canonicalize, canonicalHash, canonicalText, isJsonObject, sha256Hex, type Json, type JsonObject } from "./canonical.js";
export * from "./wire.js";
export { KeyPair, PublicKeys, verifyEd25519, verifyEd25519Async, type ApiPublicKeys, type KeyPairSecret } from "./crypto.js";
export {
  MAX_COPIES, openCopy, openCopyAsync, Recipient, seal, sealAsync, sealCopy, senderKeyId, signedBytes, type Envelope, type EnvelopeCopy,
  type OpenedCopy, type OpenOptions, type SealOptions,
} from "./envelope.js";
export {
  ALG, detachedParts, ed25519PublicJwk, generatePrivateJwk, jwkThumbprint, manifestSigningBytes, signDetached,
  signManifest, verifyDetached, verifyManifest, type PrivateJwk, type PublicJwk,
} from "./jose.js";
export {
  approveDevice, deviceApprovalBytes, deviceApprovalValid, fingerprint, FINGERPRINT_ITERATIONS, runtimeKeyBytes,
  runtimeKeyVouched, safetyNumber, signRuntimeKey, type DeviceApprovalFields,
} from "./statements.js";
export {
  checkShape as checkConsentShape, CONSENT_FIELDS, signConsent, statementBytes as consentStatementBytes,
  verifyConsent, type ConsentFields, type ConsentStatement, type SignedConsent,
} from "./consentStatements.js";
export { indexedDbStore, memoryStore, type Store } from "./store.js";
export { fileStore } from "./fileStoreUnavailable.js";
export { LocalState, type Party } from "./localState.js";
export {
  HIGH_PROMPT_TIMEOUT_MS, MEDIUM_WINDOW_MS, SensitivityPolicy, type PolicySubject, type Sensitivity,
} from "./policy.js";
export { AuditLog, RETENTION_MS, type AuditEntry } from "./audit.js";
export {
  compileManifest, decide, DEFAULT_TIMEOUT_MS, PRESET_SCOPES, responseDenied, responseError, responseOk,
  type CompiledManifest, type CompiledTool, type DecideContext, type Decision,
} from "./contract.js";
export { compileSchema, type SchemaValidator } from "./schema.js";
export {
  compileGrants, grantOptionsOf, sameGrantOptions, type CompiledGrant, type GrantOption, type GrantOptions,
} from "./grants.js";
export {
  callApi, credentialOf, errorFor, exchangeAgentKey, FetchTransport, pollEvents, sendMessage, TokenSource,
  type AccessToken, type Credential, type CredentialInput, type EventFrame, type HttpResponse, type RequestOptions,
  type SessionCredential, type Transport,
} from "./rest.js";
export {
  listen, reconnectDelay, socketUrl, useWebSocket, type ListenOptions, type WebSocketConstructor,
} from "./events.js";
export { AGENT, KeyPins, ManifestVerifier, publicIdentity, USER, type VerifiedManifest } from "./trust.js";
export {
  agentKeysById, chainedRoot, KeyDirectory, listedRoot, relationKeysFrom, userKeys, type DeviceKey, type RelationKeys,
} from "./keys.js";
export {
  acknowledgementOf, changedScopes, ConsentMemory, grantOptionsBelieved, RelationViews, viewNames, type Believed, type RelationView,
} from "./views.js";
export {
  Device, type CallContext, type DeviceOptions,
  type ToolHandler, type DeviceNotice,
} from "./device.js";
export { callRefusal, withDeadline } from "./callChecks.js";
export { MAX_WAITING_PROMPTS, type PromptAnswer, type PromptRequest } from "./prompts.js";
export { UNUSED_GRANT_DAYS, type UnusedGrant } from "./deviceConsent.js";
export { Agent, toolAnswerFrom, type AgentOptions, type ToolAnswer } from "./agent.js";
