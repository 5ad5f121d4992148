/** The Node-only parts of @hashee/sdk: `import { fileStore } from "@hashee/sdk/node"`. */
export { fileStore } from "./fileStore.js";
