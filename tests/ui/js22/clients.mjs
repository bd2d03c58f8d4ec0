// The scenarios of ../js/scenarios.mjs with this folder's packages (ai 7, which declares
// node >= 22), run by this folder's Node 22: `node_modules/.bin/node clients.mjs <base-url>`.
import { HttpAgent } from "@ag-ui/client";
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { runRecipes } from "../js/recipes.mjs";
import { runAll } from "../js/scenarios.mjs";

const [base, snippets] = process.argv.slice(2);
const clients = { HttpAgent, DefaultChatTransport, readUIMessageStream };
const out = await runAll(base, clients);
if (snippets) out.recipes = await runRecipes(base, snippets, clients); // docs/ui.md's, extracted
console.log(JSON.stringify(out));
