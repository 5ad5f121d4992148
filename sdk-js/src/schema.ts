/**
 * JSON Schema (Draft 2020-12) validation of a tool's arguments and results, behind one
 * small seam so the engine can change without touching the chain. Ajv's 2020-12 build
 * compiles each schema once; no remote reference is ever fetched (one that is not local
 * fails to compile, and a tool whose schema does not compile runs nothing). Argument values
 * never appear in details.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import type { ErrorDetail } from "./errors.js";

export const MAX_DETAILS = 20;
const MASK = "[value]";
// Validation keywords → the registry's detail codes (as hashee_sdk.contract maps them).
const DETAIL_CODES: Record<string, string> = {
  required: "REQUIRED", additionalProperties: "UNKNOWN_FIELD", unevaluatedProperties: "UNKNOWN_FIELD",
  type: "INVALID_TYPE", pattern: "PATTERN_MISMATCH", maxLength: "TOO_LONG", maxItems: "TOO_LONG",
  maxProperties: "TOO_LONG", minimum: "OUT_OF_RANGE", maximum: "OUT_OF_RANGE", exclusiveMinimum: "OUT_OF_RANGE",
  exclusiveMaximum: "OUT_OF_RANGE",
};

const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false, verbose: false });

export interface SchemaValidator {
  isValid(instance: unknown): boolean;
  /** SPEC §2 details, pointers rooted at `/arguments` (or `/result`), values masked. */
  details(instance: unknown): ErrorDetail[];
}

/** The compiled schema, or null when it does not compile (the tool then runs nothing). */
export function compileSchema(schema: unknown, root: "/arguments" | "/result"): SchemaValidator | null {
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema as object);
  } catch {
    return null;
  }
  return {
    isValid: (instance) => validate(instance) === true,
    details(instance) {
      if (validate(instance) === true) return [];
      return (validate.errors ?? []).slice(0, MAX_DETAILS).map((error) => detail(error, root))
        .sort((a, b) => (a.path === b.path ? a.code.localeCompare(b.code) : a.path < b.path ? -1 : 1));
    },
  };
}

function detail(error: ErrorObject, root: string): ErrorDetail {
  let path = root + error.instancePath;
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "required" && typeof params["missingProperty"] === "string") {
    path += `/${params["missingProperty"].replace(/~/g, "~0").replace(/\//g, "~1")}`;
  }
  if ((error.keyword === "additionalProperties" || error.keyword === "unevaluatedProperties")
    && typeof (params["additionalProperty"] ?? params["unevaluatedProperty"]) === "string") {
    path += `/${String(params["additionalProperty"] ?? params["unevaluatedProperty"]).replace(/~/g, "~0").replace(/\//g, "~1")}`;
  }
  // Ajv's messages name limits and types, never the value; the mask stands in where one would be.
  const message = error.message ?? MASK;
  return { path, code: DETAIL_CODES[error.keyword] ?? "INVALID_VALUE", message };
}
