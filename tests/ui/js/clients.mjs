// Drives treadle's UI endpoints through the official clients and prints what they
// reconstructed as one JSON object: `node clients.mjs <base-url> [<folder of docs/ui.md snippets>]`.
//   AG-UI: @ag-ui/client's HttpAgent.  Vercel AI SDK: the `ai` package's
//   DefaultChatTransport (what useChat uses) and readUIMessageStream.
// The packages are this folder's (Node 20: ai 6); tests/ui/js22 runs the same scenarios
// with Node 22 and ai 7.
import { HttpAgent } from "@ag-ui/client";
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { runRecipes } from "./recipes.mjs";
import { runAll } from "./scenarios.mjs";

const [base, snippets] = process.argv.slice(2);
const clients = { HttpAgent, DefaultChatTransport, readUIMessageStream };
const out = await runAll(base, clients);
if (snippets) out.recipes = await runRecipes(base, snippets, clients); // docs/ui.md's, extracted
console.log(JSON.stringify(out));
