/** The Node build of the entry point: everything of ./index.ts, with the real fileStore. */
export * from "./index.js";
export { fileStore } from "./node/fileStore.js";
